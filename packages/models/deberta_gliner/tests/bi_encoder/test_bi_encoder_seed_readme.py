"""vLLM Factory 0.2's README commands and requests for this checkpoint (the shared suite:
:mod:`vllm_factory.testing.gliner.seed`), served under 0.2's name for its GLiNER linker, a
DeBERTa bi-encoder."""

from vllm_factory.testing.gliner.seed import *

README_PLUGIN = "deberta_gliner_linker_io"
