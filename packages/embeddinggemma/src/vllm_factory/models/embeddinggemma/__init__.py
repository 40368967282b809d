"""EmbeddingGemma for vLLM: architecture ``EmbeddingGemmaForEmbedding``, IOProcessor
``embeddinggemma_io``."""

from vllm_factory.models.embeddinggemma.version import __version__

ARCHITECTURE = "EmbeddingGemmaForEmbedding"
IO_PROCESSOR = "embeddinggemma_io"

__all__ = ["ARCHITECTURE", "IO_PROCESSOR", "__version__"]
