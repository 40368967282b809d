"""ColLFM2 (sauerkrautlm-colpali's ColLFM2: LFM2-VL with a ColPali projection) for vLLM."""

from vllm_factory.models.collfm2.version import __version__ as __version__

ARCHITECTURE = "ColLFM2ForRetrieval"
IO_PROCESSOR = "collfm2_io"
MODEL = "model:ColLFM2"
IO_PROCESSOR_CLASS = "io_processor:ColLFM2IOProcessor"
COLPALI_BACKBONE_TYPES = ("lfm2_vl",)
