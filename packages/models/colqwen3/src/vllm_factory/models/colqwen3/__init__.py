"""ColQwen3 (colpali-engine's ColQwen3: Qwen3-VL with a ColPali projection) for vLLM:
architecture ``ColQwen3ForRetrieval``, IOProcessor ``colqwen3_io``."""

from vllm_factory.models.colqwen3.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-colqwen3"
ARCHITECTURE = "ColQwen3ForRetrieval"
IO_PROCESSOR = "colqwen3_io"
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.colqwen3.model:ColQwen3"
IO_PROCESSOR_CLASS = "vllm_factory.models.colqwen3.io_processor.ColQwen3IOProcessor"
# Backbone config.json model_type values this package serves (read by --config-format colpali).
COLPALI_BACKBONE_TYPES = ("qwen3_vl",)
