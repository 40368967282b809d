"""ModernBERT encoder backbone built from vLLM layers and vllm-factory kernels."""

from vllm_factory.backbones.modernbert.attention import PackedBatch
from vllm_factory.backbones.modernbert.encoder import ModernBertEncoder
from vllm_factory.backbones.modernbert.version import __version__

__all__ = ["ModernBertEncoder", "PackedBatch", "__version__"]
