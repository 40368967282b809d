"""GLiNER on a DeBERTa-v2/v3 encoder (gliner_multi-v2.1, knowledgator's models, ...)."""

from vllm_factory.models.deberta_gliner.version import __version__ as __version__

ARCHITECTURE = "DebertaGLiNERForSpanNER"
IO_PROCESSOR = "deberta_gliner_io"
MODEL = "model:DebertaGLiNER"
IO_PROCESSOR_CLASS = "io_processor:DebertaGLiNERIOProcessor"
# DeBERTa-v3 and mDeBERTa-v3 configs are DebertaV2Config, model_type "deberta-v2".
GLINER_ENCODER_TYPES = ("deberta-v2",)
