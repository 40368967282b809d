"""Entry points: vLLM calls these at start-up in every process (what they register is
declared in the package module)."""

from vllm_factory.core.registration import entry_points
from vllm_factory.heads.colpali.config_format import register_plugin_extras

# Also: vllm serve NEMOTRON_COLEMBED_DIR --runner pooling --config-format colpali
register, io_processor = entry_points(__package__, also=register_plugin_extras)
