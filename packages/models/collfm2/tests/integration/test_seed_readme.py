"""vLLM Factory 0.2's README commands and requests for this model (the shared suite:
:mod:`vllm_factory.testing.colpali.seed`)."""

from vllm_factory.testing.colpali.seed import *
