"""GLiNER on a ModernBERT / mmBERT encoder: architecture ``MmBertGLiNERForSpanNER``,
IOProcessor ``mmbert_gliner_io``."""

from vllm_factory.models.mmbert_gliner.version import __version__

ARCHITECTURE = "MmBertGLiNERForSpanNER"
IO_PROCESSOR = "mmbert_gliner_io"
# gliner encoder_config model_type values this package serves (read by vllm-factory-prep).
GLINER_ENCODER_TYPES = ("modernbert",)

__all__ = ["ARCHITECTURE", "GLINER_ENCODER_TYPES", "IO_PROCESSOR", "__version__"]
