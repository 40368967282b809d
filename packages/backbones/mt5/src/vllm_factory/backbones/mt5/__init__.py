"""mT5 / T5 encoder backbone built from vLLM layers and vllm-factory kernels."""

from vllm_factory.backbones.mt5.encoder import MT5Encoder, lora_packed_modules, map_hf_name
from vllm_factory.backbones.mt5.version import __version__
from vllm_factory.kernels.t5_attention import SequenceGroups
from vllm_factory.kernels.t5_position_bias import position_bias, relative_position_bucket

__all__ = [
    "MT5Encoder",
    "SequenceGroups",
    "__version__",
    "lora_packed_modules",
    "map_hf_name",
    "position_bias",
    "relative_position_bucket",
]
