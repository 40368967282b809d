"""MmBertGLiNER2: our ModernBERT encoder + the GLiNER2 span-architecture heads.

gliner2 builds its span model on a ModernBERT / mmBERT encoder config as on DeBERTa: the
encoder is transformers' ``ModernBertModel`` (``AutoModel``), saved under ``encoder.`` with its
own names, which :class:`~vllm_factory.backbones.modernbert.ModernBertEncoder` loads as they
are; the heads are the same.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from vllm_factory.backbones.modernbert import ModernBertEncoder
from vllm_factory.models.gliner2.model import GLiNER2Model


class MmBertGLiNER2(GLiNER2Model):
    def build_encoder(self, hf_config: Any, prefix: str) -> nn.Module:
        return ModernBertEncoder(hf_config, prefix=prefix)
