"""Entry points: vLLM calls these at start-up in every process."""

from vllm_factory.core.registration import io_processor_entry, register_architecture
from vllm_factory.heads.gliner.config_format import register_config_format
from vllm_factory.models.mmbert_gliner import ARCHITECTURE

DISTRIBUTION = "vllm-factory-mmbert-gliner"


def register() -> None:
    register_architecture(
        DISTRIBUTION, ARCHITECTURE, "vllm_factory.models.mmbert_gliner.model:MmBertGLiNER"
    )
    register_config_format()  # vllm serve GLINER_DIR --config-format gliner


def io_processor() -> str:
    return io_processor_entry(
        DISTRIBUTION, "vllm_factory.models.mmbert_gliner.io_processor.MmBertGLiNERIOProcessor"
    )
