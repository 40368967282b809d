"""The ColBERT head: Dense projection(s) then L2 normalisation of every token vector."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest
from vllm_factory.core.sentence_transformers import DenseLayer, DenseSpec, load_dense_stack


class ColBERTHead(FactoryPooler):
    """Per-token projection + normalisation; returns every token (filtering is the
    IOProcessor's job, since which tokens survive depends on query vs document)."""

    def __init__(self, dense: Sequence[DenseSpec], dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if not dense:
            raise ValueError("a ColBERT checkpoint needs at least one Dense module")
        self.specs = tuple(dense)
        self.projections = nn.ModuleList(DenseLayer(spec, dtype=dtype) for spec in dense)

    @property
    def dim(self) -> int:
        return self.specs[-1].out_features

    def load_checkpoint_weights(self) -> set[str]:
        """Load each Dense module's ``linear.*`` weights from its own folder."""
        return load_dense_stack(self.projections, "projections")

    def project(self, hidden_states: torch.Tensor) -> torch.Tensor:
        out = hidden_states.to(self.projections[0].linear.weight.dtype)
        for layer in self.projections:
            out = layer(out)
        return F.normalize(out, p=2, dim=-1)

    def forward(
        self, hidden_states: Sequence[torch.Tensor], requests: Sequence[PoolerRequest]
    ) -> list[torch.Tensor]:
        sizes = [h.shape[0] for h in hidden_states]
        # One matmul for the whole batch, then split: outputs own fresh storage.
        projected = self.project(torch.cat(list(hidden_states), dim=0))
        return list(torch.split(projected, sizes))
