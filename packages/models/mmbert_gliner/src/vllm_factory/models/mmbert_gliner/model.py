"""MmBertGLiNER: our ModernBERT encoder + the shared GLiNER span head."""

from __future__ import annotations

from typing import Any, ClassVar

from torch import nn
from vllm_factory.backbones.modernbert import LORA_PACKED_MODULES, ModernBertEncoder
from vllm_factory.core.lora import FactoryLoRA
from vllm_factory.heads.gliner.model import GLiNERSpanModel, adapter_mapper


class MmBertGLiNER(GLiNERSpanModel, FactoryLoRA):
    """gliner names the encoder ``token_rep_layer.bert_layer.model.<ModernBertModel names>``,
    which is the shared default mapping.

    vLLM's LoRA (``--enable-lora``) wraps the encoder's parallel linear layers (``Wqkv``,
    ``Wo``, ``Wi``; the fused ones through the backbone's packed-modules mapping). A GLiNER
    adapter is PEFT's LoRA on gliner's encoder module: its names are the encoder's own
    (``layers.N...``), or gliner's full names for one made on the whole model; the mapper puts
    both under this model's ``model.``. The span head is plain torch layers that vLLM's LoRA
    does not wrap: an adapter that targets it is refused when it loads."""

    packed_modules_mapping: ClassVar[dict[str, list[str]]] = LORA_PACKED_MODULES
    hf_to_vllm_mapper = adapter_mapper("layers.")

    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        return ModernBertEncoder(hf_config, prefix=prefix)
