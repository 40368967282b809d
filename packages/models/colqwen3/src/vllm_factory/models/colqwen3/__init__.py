"""ColQwen3 (colpali-engine's ColQwen3: Qwen3-VL with a ColPali projection) for vLLM."""

from vllm_factory.models.colqwen3.version import __version__ as __version__

ARCHITECTURE = "ColQwen3ForRetrieval"
IO_PROCESSOR = "colqwen3_io"
MODEL = "model:ColQwen3"
IO_PROCESSOR_CLASS = "io_processor:ColQwen3IOProcessor"
COLPALI_BACKBONE_TYPES = ("qwen3_vl",)
