"""``ColBERTModel``: the backbone-agnostic vLLM model class of every ColBERT package.

A model package subclasses it and provides only its encoder (:meth:`build_backbone`). The
encoder contract, on vLLM's flat batch: ``forward(input_ids, positions) -> [num_tokens,
hidden]`` when every token may attend to every token of its sequence (the path vLLM may
compile); ``forward_hidden_keys(input_ids, positions, hidden_keys)`` when some tokens must not
be attended to (``hidden_keys`` [T] bool: PyLate's hidden query expansion);
``embed_input_ids(input_ids)`` and ``load_weights(weights) -> set[str]`` taking Hugging Face
names; optionally ``hide_trailing_keys(token_id) -> bool``, True where ``forward`` itself hides
each sequence's trailing run of that token (on the device: no host check per step). The
checkpoint is loaded as PyLate or sentence-transformers saved it: encoder weights from the
top-level safetensors, the projection from its ``Dense`` module folder(s).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from transformers import AutoTokenizer
from vllm_factory.core.adapter import VllmPoolerAdapter
from vllm_factory.core.compat import SupportsLateInteraction, default_pooling_type
from vllm_factory.core.model import FactoryModel
from vllm_factory.heads.colbert.expansion import expansion_token_id, hidden_expansion_keys
from vllm_factory.heads.colbert.head import ColBERTHead
from vllm_factory.heads.colbert.settings import read_colbert_settings


# CLS as the default sequence pooling makes vLLM treat the model as encoder-only: whole
# prompts per step (packed encoders need them), no chunked prefill, no prefix caching.
@default_pooling_type(seq_pooling_type="CLS", tok_pooling_type="ALL")
class ColBERTModel(FactoryModel, SupportsLateInteraction):
    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        super().__init__(vllm_config)
        model_config = self.model_config
        self.settings = read_colbert_settings(self.files)
        self.model = self.build_backbone(model_config.hf_config, prefix=f"{prefix}model")
        head = ColBERTHead(self.settings.dense, dtype=model_config.head_dtype)
        self.pooler = VllmPoolerAdapter(head)
        self.expansion_id: int | None = None
        if self.settings.hides_expansion_keys:
            tokenizer = AutoTokenizer.from_pretrained(
                model_config.tokenizer, revision=getattr(model_config, "tokenizer_revision", None)
            )
            self.expansion_id = expansion_token_id(tokenizer)
        # An encoder that hides the expansion keys on the device itself (ModernBERT's in-graph
        # attention) needs no host check per step.
        hide = getattr(self.model, "hide_trailing_keys", None)
        self.hides_on_device = bool(
            self.expansion_id is not None and hide is not None and hide(self.expansion_id)
        )

    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        """The encoder of this package (see the module docstring for its contract)."""
        raise NotImplementedError

    def encode(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if self.expansion_id is not None and not self.hides_on_device:
            hidden_keys = hidden_expansion_keys(input_ids, positions, self.expansion_id)
            if hidden_keys is not None:
                return self.model.forward_hidden_keys(input_ids, positions, hidden_keys)
        return self.model(input_ids, positions)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        loaded = {f"model.{name}" for name in self.model.load_weights(weights)}
        loaded |= {f"pooler.head.{name}" for name in self.pooler.head.load_checkpoint_weights()}
        return loaded
