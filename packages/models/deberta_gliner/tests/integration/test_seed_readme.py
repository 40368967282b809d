"""vLLM Factory 0.2's README commands and requests for this checkpoint (the shared suite:
:mod:`vllm_factory.testing.gliner.seed`), served under its own name."""

from vllm_factory.testing.gliner.seed import *

README_PLUGIN = "deberta_gliner_io"
