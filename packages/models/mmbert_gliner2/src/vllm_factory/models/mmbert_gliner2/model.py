"""MmBertGLiNER2: our ModernBERT encoder + the GLiNER2 span-architecture heads.

gliner2 builds its span model on a ModernBERT / mmBERT encoder config as on DeBERTa: the
encoder is transformers' ``ModernBertModel`` (``AutoModel``), saved under ``encoder.`` with its
own names, which :class:`~vllm_factory.backbones.modernbert.ModernBertEncoder` loads as they
are; the heads are the same.
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import nn
from vllm.model_executor.models.utils import WeightsMapper
from vllm_factory.backbones.modernbert import LORA_PACKED_MODULES, ModernBertEncoder
from vllm_factory.core.lora import FactoryLoRA
from vllm_factory.models.gliner2.model import ENCODER_PREFIX, GLiNER2Model


class MmBertGLiNER2(GLiNER2Model, FactoryLoRA):
    """vLLM's LoRA (``--enable-lora``) wraps the encoder's parallel linear layers (``Wqkv``,
    ``Wo``, ``Wi``; the fused ones through the backbone's packed-modules mapping); gliner2's
    adapters name them under ``encoder.``, which the mapper turns into this model's
    ``model.``, as for the DeBERTa GLiNER2. Heads that an adapter targets are refused."""

    packed_modules_mapping: ClassVar[dict[str, list[str]]] = LORA_PACKED_MODULES
    hf_to_vllm_mapper = WeightsMapper(orig_to_new_prefix={ENCODER_PREFIX: "model."})

    def build_encoder(self, hf_config: Any, prefix: str) -> nn.Module:
        return ModernBertEncoder(hf_config, prefix=prefix)
