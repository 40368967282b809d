"""LFM2-ColBERT: our packed LFM2 encoder (``Lfm2Model`` weights) in the shared ColBERT model
class."""

from __future__ import annotations

from typing import Any

from torch import nn
from vllm_factory.heads.colbert.model import ColBERTModel
from vllm_factory.models.lfm2_colbert.encoder import Lfm2Encoder


class Lfm2ColBERT(ColBERTModel):
    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        return Lfm2Encoder(hf_config)
