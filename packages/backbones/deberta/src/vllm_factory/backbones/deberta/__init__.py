"""DeBERTa-v2/v3 encoder backbone built from vLLM layers and vllm-factory kernels."""

from vllm_factory.backbones.deberta.encoder import DebertaV2Encoder, PackedSequences
from vllm_factory.backbones.deberta.version import __version__

__all__ = ["DebertaV2Encoder", "PackedSequences", "__version__"]
