"""vLLM Factory 0.2's prep and serve commands and its clients' request for GLiNER2 (the shared
suite: :mod:`vllm_factory.testing.gliner2.seed`)."""

from vllm_factory.testing.gliner2.seed import *
