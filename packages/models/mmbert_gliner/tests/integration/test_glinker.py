"""glinker's entity-linking pipeline with L1, L3 and L4 served by this package's uni-encoder
server (the shape of the GLiNER linker's reranker, a ModernBERT-family encoder) vs the same
pipeline with gliner in process, and the server's ``data.candidates`` form vs glinker's L3 /
L4 results (the shared suite: :mod:`vllm_factory.testing.gliner.glinker`)."""

from vllm_factory.testing.gliner.glinker import *
