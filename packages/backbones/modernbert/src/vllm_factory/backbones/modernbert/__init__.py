"""ModernBERT encoder backbone built from vLLM layers and vllm-factory kernels."""

from vllm_factory.backbones.modernbert.encoder import LORA_PACKED_MODULES, ModernBertEncoder
from vllm_factory.backbones.modernbert.version import __version__
from vllm_factory.kernels.packed_attention import PackedBatch

__all__ = ["LORA_PACKED_MODULES", "ModernBertEncoder", "PackedBatch", "__version__"]
