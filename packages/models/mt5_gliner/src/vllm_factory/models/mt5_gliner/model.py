"""MT5GLiNER: our mT5 / T5 encoder + the shared GLiNER span head."""

from __future__ import annotations

from typing import Any

from torch import nn
from vllm_factory.backbones.mt5 import MT5Encoder
from vllm_factory.heads.gliner.model import GLiNERSpanModel


class MT5GLiNER(GLiNERSpanModel):
    """gliner wraps the encoder in transformers' ``T5EncoderModel`` and stores it as
    ``token_rep_layer.bert_layer.model.<T5EncoderModel names>`` (the shared default mapping;
    ``shared.weight`` and its tied copy ``encoder.embed_tokens.weight`` both land on our
    one embedding)."""

    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        return MT5Encoder(hf_config, prefix=prefix)
