"""glinker's entity-linking pipeline with L1 and L3 served by this package's bi-encoder server
vs the same pipeline with gliner in process (the shared suite:
:mod:`vllm_factory.testing.gliner.glinker`)."""

from vllm_factory.testing.gliner.glinker import *
