"""LFM2-ColBERT for vLLM: architecture ``Lfm2ColBERTForRetrieval``, IOProcessor
``lfm2_colbert_io``."""

from vllm_factory.models.lfm2_colbert.version import __version__

ARCHITECTURE = "Lfm2ColBERTForRetrieval"
# Backbone config.json model_type values this package serves (read by --config-format colbert).
COLBERT_BACKBONE_TYPES = ("lfm2",)
IO_PROCESSOR = "lfm2_colbert_io"

__all__ = ["ARCHITECTURE", "COLBERT_BACKBONE_TYPES", "IO_PROCESSOR", "__version__"]
