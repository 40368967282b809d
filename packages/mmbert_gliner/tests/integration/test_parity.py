"""Served span x label scores and entities vs gliner's, on this package's tiny checkpoint
(the shared suite: :mod:`vllm_factory.heads.gliner.testing.parity`)."""

from vllm_factory.heads.gliner.testing.parity import (  # noqa: F401  (collected here)
    served_scores,
    test_entities_match_gliner,
    test_score_tensors_match_gliner,
)
