"""GLiNER on a DeBERTa-v2/v3 encoder (gliner_multi-v2.1, knowledgator's models, ...):
architecture ``DebertaGLiNERForSpanNER``, IOProcessor ``deberta_gliner_io``."""

from vllm_factory.models.deberta_gliner.version import __version__

ARCHITECTURE = "DebertaGLiNERForSpanNER"
IO_PROCESSOR = "deberta_gliner_io"
# gliner encoder_config model_type values this package serves (read by vllm-factory-prep).
# DeBERTa-v3 and mDeBERTa-v3 configs are DebertaV2Config, model_type "deberta-v2".
GLINER_ENCODER_TYPES = ("deberta-v2",)

__all__ = ["ARCHITECTURE", "GLINER_ENCODER_TYPES", "IO_PROCESSOR", "__version__"]
