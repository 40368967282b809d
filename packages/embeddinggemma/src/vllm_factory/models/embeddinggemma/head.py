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
from vllm_factory.models.embeddinggemma.settings import DenseSpec, EmbeddingGemmaSettings


def read_dense_weights(spec: DenseSpec) -> dict[str, torch.Tensor]:
    """``{"weight": ..., "bias": ...}`` of one Dense module from its own folder."""
    safetensors_path = spec.folder / "model.safetensors"
    if safetensors_path.exists():
        from safetensors.torch import load_file

        state = load_file(str(safetensors_path))
    else:
        state = torch.load(spec.folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    return {key.removeprefix("linear."): value for key, value in state.items()}


class DenseLayer(nn.Module):
    def __init__(self, spec: DenseSpec) -> None:
        super().__init__()
        self.spec = spec
        self.linear = nn.Linear(spec.in_features, spec.out_features, bias=spec.bias)
        self.activation = nn.Tanh() if spec.activation == "tanh" else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))


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
        loaded: set[str] = set()
        for index, layer in enumerate(self.dense):
            state = read_dense_weights(layer.spec)
            for name, param in layer.linear.named_parameters():
                if name not in state:
                    raise ValueError(f"{layer.spec.folder.name} has no {name}")
                with torch.no_grad():
                    param.copy_(state[name].to(param.dtype))
                loaded.add(f"dense.{index}.linear.{name}")
        return loaded

    def embed(self, pooled: torch.Tensor) -> torch.Tensor:
        """``[B, hidden]`` mean-pooled states -> ``[B, dimension]`` sentence embeddings."""
        x = pooled
        for layer in self.dense:
            x = layer(x.to(layer.linear.weight.dtype))
        if self.normalize:
            x = F.normalize(x, p=2, dim=-1)
        return x

    def forward(
        self,
        hidden_states: Sequence[torch.Tensor],
        requests: Sequence[PoolerRequest],
    ) -> list[torch.Tensor]:
        if not hidden_states:
            return []
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
