"""GLiNER on a ModernBERT / mmBERT encoder."""

from vllm_factory.models.mmbert_gliner.version import __version__ as __version__

ARCHITECTURE = "MmBertGLiNERForSpanNER"
IO_PROCESSOR = "mmbert_gliner_io"
MODEL = "model:MmBertGLiNER"
IO_PROCESSOR_CLASS = "io_processor:MmBertGLiNERIOProcessor"
GLINER_ENCODER_TYPES = ("modernbert",)
