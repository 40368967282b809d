"""Entry points: vLLM calls these at start-up in every process (what they register is
declared in the package module)."""

from vllm_factory.core.registration import entry_points
from vllm_factory.heads.gliner.config_format import register_config_format

# Also: vllm serve GLINER_DIR --config-format gliner
register, io_processor = entry_points(__package__, also=register_config_format)
