"""Entry points: vLLM calls these at start-up in every process."""

from vllm_factory.core.registration import io_processor_entry, register_architecture
from vllm_factory.models.embeddinggemma import ARCHITECTURE

DISTRIBUTION = "vllm-factory-embeddinggemma"


def register() -> None:
    register_architecture(
        DISTRIBUTION, ARCHITECTURE, "vllm_factory.models.embeddinggemma.model:EmbeddingGemma"
    )


def io_processor() -> str:
    return io_processor_entry(
        DISTRIBUTION, "vllm_factory.models.embeddinggemma.io_processor.EmbeddingGemmaIOProcessor"
    )
