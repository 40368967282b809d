"""Entry points: vLLM calls these at start-up in every process."""

from vllm_factory.core.registration import io_processor_entry, register_architecture
from vllm_factory.heads.colbert.config_format import register_config_format
from vllm_factory.models.moderncolbert import ARCHITECTURE

DISTRIBUTION = "vllm-factory-moderncolbert"


def register() -> None:
    register_architecture(
        DISTRIBUTION, ARCHITECTURE, "vllm_factory.models.moderncolbert.model:ModernColBERT"
    )
    register_config_format()  # vllm serve COLBERT_DIR --config-format colbert


def io_processor() -> str:
    return io_processor_entry(
        DISTRIBUTION, "vllm_factory.models.moderncolbert.io_processor.ModernColBERTIOProcessor"
    )
