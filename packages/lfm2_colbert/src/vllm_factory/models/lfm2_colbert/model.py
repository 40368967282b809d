"""LFM2-ColBERT: our packed LFM2 encoder + the shared ColBERT head, as a vLLM pooling model.

Loads a PyLate / sentence-transformers checkpoint as saved: ``Lfm2Model`` weights from the
top-level safetensors, the projection from the ``Dense`` module folder(s).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from transformers import AutoTokenizer
from vllm.model_executor.models.interfaces import SupportsLateInteraction
from vllm.model_executor.models.interfaces_base import default_pooling_type
from vllm_factory.core.adapter import VllmPoolerAdapter
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.heads.colbert import ColBERTHead, read_colbert_settings
from vllm_factory.heads.colbert.expansion import expansion_token_id, trailing_expansion_tokens
from vllm_factory.models.lfm2_colbert.encoder import Lfm2Encoder


# CLS as the default sequence pooling makes vLLM treat the model as encoder-only: whole
# prompts per step (the packed encoder needs them), no chunked prefill, no prefix caching.
@default_pooling_type(seq_pooling_type="CLS", tok_pooling_type="ALL")
class Lfm2ColBERT(nn.Module, SupportsLateInteraction):
    is_pooling_model = True

    def __init__(self, *, vllm_config, prefix: str = "") -> None:
        super().__init__()
        model_config = vllm_config.model_config
        files = CheckpointFiles(model_config.model, getattr(model_config, "revision", None))
        self.settings = read_colbert_settings(files)
        self.model = Lfm2Encoder(model_config.hf_config)
        head = ColBERTHead(self.settings.dense, dtype=model_config.head_dtype)
        self.pooler = VllmPoolerAdapter(head)
        self.expansion_id: int | None = None
        if self.settings.hides_expansion_keys:
            tokenizer = AutoTokenizer.from_pretrained(
                model_config.tokenizer, revision=getattr(model_config, "tokenizer_revision", None)
            )
            self.expansion_id = expansion_token_id(tokenizer)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_input_ids(input_ids)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        intermediate_tensors=None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        hidden = None
        if self.expansion_id is not None:
            hidden = trailing_expansion_tokens(input_ids, positions, self.expansion_id)
        return self.model(input_ids, positions, hidden, inputs_embeds)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        loaded = {f"model.{name}" for name in self.model.load_weights(weights)}
        loaded |= {f"pooler.head.{name}" for name in self.pooler.head.load_checkpoint_weights()}
        return loaded
