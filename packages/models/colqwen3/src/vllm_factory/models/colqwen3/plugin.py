"""Entry points: vLLM calls these at start-up in every process (what they register is
declared in the package module)."""

from vllm_factory.core.registration import entry_points
from vllm_factory.heads.colpali.config_format import register_plugin_extras

# ``vllm serve COLQWEN3_DIR --runner pooling --config-format colpali``, and without a usable
# torchvision (CPU hosts) transformers' PIL image processors for every Qwen-VL model of this
# process, vLLM's own included (see the head's image_processing).
register, io_processor = entry_points(__package__, also=register_plugin_extras)
