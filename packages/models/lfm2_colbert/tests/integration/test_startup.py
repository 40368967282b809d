"""vLLM's start-up passes through the model and the ColBERT head (the shared suite:
:mod:`vllm_factory.testing.colbert.startup`)."""

from vllm_factory.testing.colbert.startup import *
