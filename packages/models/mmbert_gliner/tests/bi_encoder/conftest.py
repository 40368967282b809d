"""Fixtures: the GLiNER family suite on this package's bi-encoder checkpoint (ModernBERT text
encoder, a small BERT label encoder of its own vocabulary and width, as the gliner-bi-*-v2.0
models pair ettin / ModernBERT with BGE): one real vLLM server on it, and gliner's outputs for
the same weights."""

from vllm_factory.testing.gliner.fixtures import *
from vllm_factory.testing.gliner.fixtures import reference_fixture

gliner_reference = reference_fixture(__file__, variant="bi-encoder-bert")
