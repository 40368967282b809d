"""Served vectors vs PyLate's and sentence-transformers' own outputs for the same weights (the
shared suite: :mod:`vllm_factory.heads.colbert.testing.parity`), and the same weights saved in
sentence-transformers' own layout vs its MultiVectorEncoder."""

from vllm_factory.heads.colbert.testing.parity import (  # noqa: F401  (collected here)
    test_parity,
    test_sentence_transformers_layout,
    test_served_scores_match_pylate,
)
