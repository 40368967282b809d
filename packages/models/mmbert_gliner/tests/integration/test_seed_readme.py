"""vLLM Factory 0.2's README commands and requests for this checkpoint (the shared suite:
:mod:`vllm_factory.testing.gliner.seed`), served under 0.2's name for its GLiNER reranker, a
ModernBERT uni-encoder: the same IOProcessor as ``mmbert_gliner_io``, which the other suites
serve."""

from vllm_factory.testing.gliner.seed import *

README_PLUGIN = "modernbert_gliner_rerank_io"
