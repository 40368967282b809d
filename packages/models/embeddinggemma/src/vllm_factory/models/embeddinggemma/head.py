"""The sentence-transformers pipeline after the transformer, as a ``FactoryPooler``.

Mean pooling over every token of a sequence (the prompt included, as EmbeddingGemma's
``include_prompt: true`` says), then each ``Dense`` module, then ``Normalize`` when the
checkpoint has one, then Matryoshka truncation when the request asks for it. Pure torch.

Per-request values arrive in ``PoolerRequest.extra``:

- ``dimensions`` (int): keep the first ``dimensions`` values;
- ``renormalize`` (bool): L2-normalise again after truncation. sentence-transformers'
  ``encode(truncate_dim=...)`` does not (the IOProcessor keeps that), vLLM's ``/v1/embeddings``
  does (OpenAI semantics: unit vectors at every size).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest
from vllm_factory.core.sentence_transformers import DenseLayer, load_dense_stack
from vllm_factory.models.embeddinggemma.settings import EmbeddingGemmaSettings


class EmbeddingGemmaHead(FactoryPooler):
    """``[n_tokens, hidden]`` per sequence -> one ``[dimension]`` (or truncated) vector."""

    def __init__(self, settings: EmbeddingGemmaSettings, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.dense = nn.ModuleList(DenseLayer(spec) for spec in settings.dense)
        self.normalize = settings.normalize
        self.dtype = dtype

    def load_checkpoint_weights(self) -> set[str]:
        """Fill the Dense layers from the checkpoint's module folders; names loaded."""
        return load_dense_stack(self.dense, "dense")

    def embed(self, pooled: torch.Tensor) -> torch.Tensor:
        """``[B, hidden]`` mean-pooled states -> ``[B, dimension]`` sentence embeddings."""
        x = pooled
        for layer in self.dense:
            x = layer(x.to(layer.linear.weight.dtype))
        if self.normalize:
            x = F.normalize(x, p=2, dim=-1)
        return x

    def forward(
        self, hidden_states: Sequence[torch.Tensor], requests: Sequence[PoolerRequest]
    ) -> list[torch.Tensor]:
        dtype = self.dtype or hidden_states[0].dtype
        pooled = torch.stack([hidden.to(dtype).mean(dim=0) for hidden in hidden_states])
        vectors = self.embed(pooled)
        outputs = []
        for vector, request in zip(vectors, requests):
            dimensions = request.extra.get("dimensions")
            if dimensions is not None and int(dimensions) < vector.shape[-1]:
                vector = vector[: int(dimensions)]
                if request.extra.get("renormalize"):
                    vector = F.normalize(vector, p=2, dim=-1)
            outputs.append(vector.clone())
        return outputs
