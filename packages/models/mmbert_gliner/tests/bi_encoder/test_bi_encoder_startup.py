"""vLLM's start-up passes through the model and the GLiNER head on the bi-encoder checkpoint
(the shared suite: :mod:`vllm_factory.testing.gliner.startup`)."""

from vllm_factory.testing.gliner.startup import *
