"""EmbeddingGemma for vLLM."""

from vllm_factory.models.embeddinggemma.version import __version__ as __version__

ARCHITECTURE = "EmbeddingGemmaForEmbedding"
IO_PROCESSOR = "embeddinggemma_io"
MODEL = "model:EmbeddingGemma"
IO_PROCESSOR_CLASS = "io_processor:EmbeddingGemmaIOProcessor"
