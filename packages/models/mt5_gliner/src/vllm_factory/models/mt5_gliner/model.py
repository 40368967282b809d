"""MT5GLiNER: our mT5 / T5 encoder + the shared GLiNER span head."""

from __future__ import annotations

import re
from typing import Any

from torch import nn
from vllm.model_executor.models.utils import WeightsMapper
from vllm_factory.backbones.mt5 import MT5Encoder, lora_packed_modules
from vllm_factory.core.lora import FactoryLoRA
from vllm_factory.heads.gliner.model import GLINER_ENCODER_PREFIX, GLiNERSpanModel

# A LoRA adapter's module names, Hugging Face's T5 block layout (behind gliner's encoder
# prefix when the adapter was made on gliner's whole model) -> this model's.
_ADAPTER_BLOCK = rf"^(?:{re.escape(GLINER_ENCODER_PREFIX)})?encoder\.block\.(\d+)\.layer\."


class MT5GLiNER(GLiNERSpanModel, FactoryLoRA):
    """gliner wraps the encoder in transformers' ``T5EncoderModel`` and stores it as
    ``token_rep_layer.bert_layer.model.<T5EncoderModel names>`` (the shared default mapping;
    ``shared.weight`` and its tied copy ``encoder.embed_tokens.weight`` both land on our
    one embedding).

    vLLM's LoRA (``--enable-lora``) wraps the encoder's parallel linear layers (``qkv``, ``o``,
    ``wi``, ``wo``; the fused ones through the backbone's packed-modules mapping, which lists
    Hugging Face's ``q`` / ``k`` / ``v`` and ``wi_0`` / ``wi_1``). A GLiNER adapter is PEFT's
    LoRA on gliner's encoder module: its names are ``T5EncoderModel``'s
    (``encoder.block.N.layer.0.SelfAttention.q``, ``...layer.1.DenseReluDense.wi_0``), or
    gliner's full names for one made on the whole model; the mapper turns both into this
    model's ``model.blocks.N.attn.q`` / ``model.blocks.N.ff.wi_0``. The relative position
    bias table, the embedding and the span head are plain torch layers that vLLM's LoRA does
    not wrap: an adapter that targets them is refused when it loads."""

    hf_to_vllm_mapper = WeightsMapper(orig_to_new_regex={
        re.compile(_ADAPTER_BLOCK + r"0\.SelfAttention\."): r"model.blocks.\1.attn.",
        re.compile(_ADAPTER_BLOCK + r"1\.DenseReluDense\."): r"model.blocks.\1.ff.",
    })  # fmt: skip

    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        # Per checkpoint: a gated feed-forward's wi_0 / wi_1 are fused, a plain wi is not.
        self.packed_modules_mapping = lora_packed_modules(self.model_config.hf_config)

    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        return MT5Encoder(hf_config, prefix=prefix)
