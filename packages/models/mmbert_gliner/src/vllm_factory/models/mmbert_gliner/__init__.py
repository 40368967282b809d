"""GLiNER on a ModernBERT / mmBERT encoder: architecture ``MmBertGLiNERForSpanNER``,
IOProcessor ``mmbert_gliner_io``."""

from vllm_factory.models.mmbert_gliner.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-mmbert-gliner"
ARCHITECTURE = "MmBertGLiNERForSpanNER"
IO_PROCESSOR = "mmbert_gliner_io"
# Also registered under vLLM Factory 0.2's name for its GLiNER reranker (a ModernBERT uni-encoder).
IO_PROCESSOR_ALIASES = ("modernbert_gliner_rerank_io",)
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.mmbert_gliner.model:MmBertGLiNER"
IO_PROCESSOR_CLASS = "vllm_factory.models.mmbert_gliner.io_processor.MmBertGLiNERIOProcessor"
# gliner encoder_config model_type values this package serves (read by vllm-factory-prep).
GLINER_ENCODER_TYPES = ("modernbert",)
