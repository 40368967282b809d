"""glinker's entity-linking pipeline with L1, L3 and L4 served by this package's uni-encoder
server (the shape of knowledgator/gliner-linker-rerank-v1.0, a ModernBERT-architecture GLiNER)
vs the same pipeline with gliner in process (the shared suite:
:mod:`vllm_factory.testing.gliner.glinker`)."""

import pytest
from vllm_factory.testing.gliner.glinker import *
from vllm_factory.testing.gliner.glinker import linking_inputs


@pytest.fixture
def glinker_inputs(corpus) -> dict:
    """A uni-encoder reads all candidate labels of a text in one prompt (160 tokens on the tiny
    checkpoint; gliner would cut the text's words off, the server refuses such a prompt):
    labels alone and a smaller knowledge base keep every text's candidates within it."""
    return {
        **linking_inputs(corpus, max_entities=120, long_descriptions=False),
        "template": "{label}",
    }
