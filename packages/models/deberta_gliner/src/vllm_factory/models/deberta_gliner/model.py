"""DebertaGLiNER: our DeBERTa-v2/v3 encoder + the shared GLiNER span head."""

from __future__ import annotations

from typing import Any, ClassVar

from torch import nn
from vllm_factory.backbones.deberta import LORA_PACKED_MODULES, DebertaV2Encoder
from vllm_factory.core.lora import FactoryLoRA
from vllm_factory.heads.gliner.model import GLiNERSpanModel, adapter_mapper


class DebertaGLiNER(GLiNERSpanModel, FactoryLoRA):
    """gliner names the encoder ``token_rep_layer.bert_layer.model.<DebertaV2Model names>``,
    the shared default mapping. The encoder reports loaded names relative to itself; the
    base class puts them under ``model.`` (where the encoder sits), as vLLM checks them.

    vLLM's LoRA (``--enable-lora``) wraps the encoder's parallel linear layers. A GLiNER
    adapter is PEFT's LoRA on gliner's encoder module (what gliner.serve's PolyLoRA wraps, and
    gliner's own ``get_peft_model`` on an encoder folder with an ``adapter_config.json``): its
    names are the encoder's own (``encoder.layer.N...``), or gliner's full names for one made
    on the whole model; the mapper puts both under this model's ``model.``. The span head is
    plain torch layers that vLLM's LoRA does not wrap: an adapter that targets it is refused
    when it loads."""

    packed_modules_mapping: ClassVar[dict[str, list[str]]] = LORA_PACKED_MODULES
    hf_to_vllm_mapper = adapter_mapper("encoder.")

    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        return DebertaV2Encoder(hf_config, prefix=prefix)
