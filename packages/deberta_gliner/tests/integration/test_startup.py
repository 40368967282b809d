"""vLLM's start-up passes through the model and the GLiNER head (the shared suite:
:mod:`vllm_factory.heads.gliner.testing.startup`)."""

from vllm_factory.heads.gliner.testing.startup import (  # noqa: F401  (collected here)
    test_engine_start_up_passes,
)
