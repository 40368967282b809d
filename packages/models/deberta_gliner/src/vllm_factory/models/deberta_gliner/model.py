"""DebertaGLiNER: our DeBERTa-v2/v3 encoder + the shared GLiNER span head."""

from __future__ import annotations

from typing import Any

from torch import nn
from vllm_factory.backbones.deberta import DebertaV2Encoder
from vllm_factory.heads.gliner.model import GLiNERSpanModel


class DebertaGLiNER(GLiNERSpanModel):
    """gliner names the encoder ``token_rep_layer.bert_layer.model.<DebertaV2Model names>``,
    the shared default mapping. The encoder reports loaded names relative to itself; the
    base class puts them under ``model.`` (where the encoder sits), as vLLM checks them."""

    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        return DebertaV2Encoder(hf_config, prefix=prefix)
