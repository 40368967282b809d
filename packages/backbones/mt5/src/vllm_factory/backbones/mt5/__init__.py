"""mT5 / T5 encoder backbone built from vLLM layers and vllm-factory kernels."""

from vllm_factory.backbones.mt5.attention import SequenceGroups
from vllm_factory.backbones.mt5.encoder import (
    DEFAULT_PREFIXES,
    GLINER_PREFIX,
    MT5Encoder,
    map_hf_name,
)
from vllm_factory.backbones.mt5.position_bias import position_bias, relative_position_bucket
from vllm_factory.backbones.mt5.version import __version__

__all__ = [
    "DEFAULT_PREFIXES",
    "GLINER_PREFIX",
    "MT5Encoder",
    "SequenceGroups",
    "__version__",
    "map_hf_name",
    "position_bias",
    "relative_position_bucket",
]
