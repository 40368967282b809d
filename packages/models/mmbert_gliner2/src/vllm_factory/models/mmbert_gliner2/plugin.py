"""Entry points: vLLM calls these at start-up in every process (what they register is
declared in the package module)."""

from vllm_factory.core.registration import entry_points
from vllm_factory.models.gliner2.config_format import register_config_format

# Also: vllm serve GLINER2_DIR --runner pooling --config-format gliner2
register, io_processor = entry_points(__package__, also=register_config_format)
