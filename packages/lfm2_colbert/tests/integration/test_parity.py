"""Served vectors vs PyLate's own outputs for the same weights (transformers' Lfm2Model; the
shared suite: :mod:`vllm_factory.heads.colbert.testing.parity`)."""

from vllm_factory.heads.colbert.testing.parity import (  # noqa: F401  (collected here)
    test_parity,
    test_served_scores_match_pylate,
)
