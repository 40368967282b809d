"""EmbeddingGemma for vLLM: architecture ``EmbeddingGemmaForEmbedding``, IOProcessor
``embeddinggemma_io``."""

from vllm_factory.models.embeddinggemma.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-embeddinggemma"
ARCHITECTURE = "EmbeddingGemmaForEmbedding"
IO_PROCESSOR = "embeddinggemma_io"
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.embeddinggemma.model:EmbeddingGemma"
IO_PROCESSOR_CLASS = "vllm_factory.models.embeddinggemma.io_processor.EmbeddingGemmaIOProcessor"
