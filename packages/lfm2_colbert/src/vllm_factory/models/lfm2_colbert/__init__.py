"""LFM2-ColBERT for vLLM: architecture ``Lfm2ColBERTForRetrieval``, IOProcessor
``lfm2_colbert_io``."""

from vllm_factory.models.lfm2_colbert.version import __version__

ARCHITECTURE = "Lfm2ColBERTForRetrieval"
IO_PROCESSOR = "lfm2_colbert_io"

__all__ = ["ARCHITECTURE", "IO_PROCESSOR", "__version__"]
