"""ModernColBERT for vLLM: architecture ``ModernColBERTForRetrieval``, IOProcessor
``moderncolbert_io``."""

from vllm_factory.models.moderncolbert.version import __version__

ARCHITECTURE = "ModernColBERTForRetrieval"
# Backbone config.json model_type values this package serves (read by --config-format colbert).
COLBERT_BACKBONE_TYPES = ("modernbert",)
IO_PROCESSOR = "moderncolbert_io"

__all__ = ["ARCHITECTURE", "COLBERT_BACKBONE_TYPES", "IO_PROCESSOR", "__version__"]
