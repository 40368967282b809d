"""GLiNER on a DeBERTa-v2/v3 encoder (gliner_multi-v2.1, knowledgator's models, ...):
architecture ``DebertaGLiNERForSpanNER``, IOProcessor ``deberta_gliner_io``."""

from vllm_factory.models.deberta_gliner.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-deberta-gliner"
ARCHITECTURE = "DebertaGLiNERForSpanNER"
IO_PROCESSOR = "deberta_gliner_io"
# Also registered under vLLM Factory 0.2's name for its GLiNER linker (a DeBERTa bi-encoder).
IO_PROCESSOR_ALIASES = ("deberta_gliner_linker_io",)
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.deberta_gliner.model:DebertaGLiNER"
IO_PROCESSOR_CLASS = "vllm_factory.models.deberta_gliner.io_processor.DebertaGLiNERIOProcessor"
# gliner encoder_config model_type values this package serves (read by vllm-factory-prep).
# DeBERTa-v3 and mDeBERTa-v3 configs are DebertaV2Config, model_type "deberta-v2".
GLINER_ENCODER_TYPES = ("deberta-v2",)
