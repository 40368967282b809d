"""GLiNER2 schema extraction (the ``gliner2`` library's span architecture: entities, text
classification, structures, relations in one pass) on a DeBERTa-v2/v3 encoder: architecture
``DebertaGLiNER2ForExtraction``, IOProcessor ``deberta_gliner2_io``."""

from vllm_factory.models.gliner2.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-gliner2"
ARCHITECTURE = "DebertaGLiNER2ForExtraction"
IO_PROCESSOR = "deberta_gliner2_io"
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.gliner2.model:DebertaGLiNER2"
IO_PROCESSOR_CLASS = "vllm_factory.models.gliner2.io_processor.GLiNER2IOProcessor"
# encoder_config model_type values this package serves (read by ``--config-format gliner2``).
GLINER2_ENCODER_TYPES = ("deberta-v2",)
