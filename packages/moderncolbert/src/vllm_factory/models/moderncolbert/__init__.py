"""ModernColBERT for vLLM: architecture ``ModernColBERTForRetrieval``, IOProcessor
``moderncolbert_io``."""

from vllm_factory.models.moderncolbert.version import __version__

ARCHITECTURE = "ModernColBERTForRetrieval"
IO_PROCESSOR = "moderncolbert_io"

__all__ = ["ARCHITECTURE", "IO_PROCESSOR", "__version__"]
