"""Entry points: vLLM calls these at start-up in every process (what they register is
declared in the package module)."""

from vllm_factory.core.image_processing import use_pil_image_processors
from vllm_factory.core.registration import entry_points
from vllm_factory.heads.colpali.config_format import register_config_format


def _also() -> None:
    # vllm serve COLQWEN3_DIR --runner pooling --config-format colpali
    register_config_format()
    # Without a usable torchvision (CPU hosts), transformers' PIL image processors for every
    # Qwen-VL model of this process, vLLM's own included (see core's image_processing).
    use_pil_image_processors()


register, io_processor = entry_points(__package__, also=_also)
