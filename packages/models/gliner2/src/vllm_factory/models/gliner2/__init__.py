"""GLiNER2 schema extraction (the ``gliner2`` library's span architecture: entities, text
classification, structures, relations in one pass) on a DeBERTa-v2/v3 encoder."""

from vllm_factory.models.gliner2.version import __version__ as __version__

ARCHITECTURE = "DebertaGLiNER2ForExtraction"
IO_PROCESSOR = "deberta_gliner2_io"
MODEL = "model:DebertaGLiNER2"
IO_PROCESSOR_CLASS = "io_processor:GLiNER2IOProcessor"
GLINER2_ENCODER_TYPES = ("deberta-v2",)
