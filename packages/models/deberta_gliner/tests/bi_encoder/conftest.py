"""Fixtures: the GLiNER family suite on this package's bi-encoder checkpoint (DeBERTa text
encoder, a DeBERTa label encoder of its own, as the GLiNER linker models are built): one
real vLLM server on it, and gliner's outputs for the same weights."""

from vllm_factory.testing.gliner.fixtures import *
from vllm_factory.testing.gliner.fixtures import reference_fixture

gliner_reference = reference_fixture(__file__, variant="bi-encoder")
