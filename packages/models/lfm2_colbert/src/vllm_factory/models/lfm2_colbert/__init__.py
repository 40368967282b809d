"""LFM2-ColBERT (LiquidAI's LFM2-ColBERT-350M and other PyLate checkpoints on an LFM2 backbone)."""

from vllm_factory.models.lfm2_colbert.version import __version__ as __version__

ARCHITECTURE = "Lfm2ColBERTForRetrieval"
IO_PROCESSOR = "lfm2_colbert_io"
MODEL = "model:Lfm2ColBERT"
IO_PROCESSOR_CLASS = "io_processor:Lfm2ColBERTIOProcessor"
COLBERT_BACKBONE_TYPES = ("lfm2",)
