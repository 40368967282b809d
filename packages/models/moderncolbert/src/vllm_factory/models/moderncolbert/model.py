"""ModernColBERT: our ModernBERT encoder in the shared ColBERT model class."""

from __future__ import annotations

from typing import Any

from torch import nn
from vllm_factory.backbones.modernbert import ModernBertEncoder
from vllm_factory.heads.colbert.model import ColBERTModel


class ModernColBERT(ColBERTModel):
    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        return ModernBertEncoder(hf_config, prefix=prefix)
