"""MmBertGLiNER: our ModernBERT encoder + the shared GLiNER span head."""

from __future__ import annotations

from typing import Any

from torch import nn
from vllm_factory.backbones.modernbert import ModernBertEncoder
from vllm_factory.heads.gliner.model import GLiNERSpanModel


class MmBertGLiNER(GLiNERSpanModel):
    """gliner names the encoder ``token_rep_layer.bert_layer.model.<ModernBertModel names>``,
    which is the shared default mapping."""

    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        return ModernBertEncoder(hf_config, prefix=prefix)
