"""ColLFM2 (sauerkrautlm-colpali's ColLFM2: LFM2-VL with a ColPali projection) for vLLM:
architecture ``ColLFM2ForRetrieval``, IOProcessor ``collfm2_io``."""

from vllm_factory.models.collfm2.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-collfm2"
ARCHITECTURE = "ColLFM2ForRetrieval"
IO_PROCESSOR = "collfm2_io"
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.collfm2.model:ColLFM2"
IO_PROCESSOR_CLASS = "vllm_factory.models.collfm2.io_processor.ColLFM2IOProcessor"
# Backbone config.json model_type values this package serves (read by --config-format colpali).
COLPALI_BACKBONE_TYPES = ("lfm2_vl",)
