"""DeBERTa-v2/v3 encoder backbone built from vLLM layers and vllm-factory kernels."""

from vllm_factory.backbones.deberta.encoder import LORA_PACKED_MODULES, DebertaV2Encoder
from vllm_factory.backbones.deberta.version import __version__
from vllm_factory.kernels.deberta_ops import PackedSequences

__all__ = ["LORA_PACKED_MODULES", "DebertaV2Encoder", "PackedSequences", "__version__"]
