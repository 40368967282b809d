"""Served vectors vs PyLate's own outputs for the same weights (transformers' Lfm2Model; the
shared suite: :mod:`vllm_factory.heads.colbert.testing.parity`)."""

from vllm_factory.heads.colbert.testing.parity import test_parity  # noqa: F401  (collected here)
