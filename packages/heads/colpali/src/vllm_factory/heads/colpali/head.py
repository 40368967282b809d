"""The ColPali head: one linear projection of every token's hidden state, then L2
normalisation (colpali-engine's ``custom_text_proj``). Pure torch; no vLLM.

Its weights sit in the checkpoint's own safetensors beside the backbone's, and its width is
not in ``config.json`` (colpali-engine fixes it in code), so :func:`projection_shape` reads it
from the safetensors headers before the weights load.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest

# Name of the projection module in the checkpoints this head reads.
PROJECTION = "custom_text_proj"


@dataclass(frozen=True)
class ProjectionShape:
    in_features: int
    out_features: int
    bias: bool


def safetensors_shapes(files: CheckpointFiles) -> dict[str, list[int]]:
    """Every tensor's shape, from the headers of the checkpoint's safetensors (one file or the
    shards of ``model.safetensors.index.json``); no tensor is read."""
    index = files.json("model.safetensors.index.json")
    names = sorted(set(index["weight_map"].values())) if index else ["model.safetensors"]
    shapes: dict[str, list[int]] = {}
    for name in names:
        path = files.path(name)
        if path is None:
            raise FileNotFoundError(f"{files.model} has no {name}")
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        shapes.update({k: v["shape"] for k, v in header.items() if k != "__metadata__"})
    return shapes


def projection_shape(files: CheckpointFiles) -> ProjectionShape:
    """The projection's shape as the checkpoint stores it (under any prefix)."""
    shapes = safetensors_shapes(files)
    weight = [k for k in shapes if k.endswith(f"{PROJECTION}.weight")]
    if len(weight) != 1:
        raise ValueError(f"{files.model}: expected one {PROJECTION}.weight tensor, found {weight}")
    out_features, in_features = shapes[weight[0]]
    bias = weight[0].removesuffix("weight") + "bias" in shapes
    return ProjectionShape(in_features, out_features, bias)


def is_projection_weight(name: str) -> bool:
    return f"{PROJECTION}." in name


class ColPaliHead(FactoryPooler):
    """Per-token projection + normalisation; returns every token of every sequence."""

    def __init__(self, shape: ProjectionShape, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.shape = shape
        self.proj = nn.Linear(shape.in_features, shape.out_features, bias=shape.bias, dtype=dtype)

    @property
    def dim(self) -> int:
        return self.shape.out_features

    def load_checkpoint_weights(self, tensors: dict[str, torch.Tensor]) -> set[str]:
        """``tensors``: the projection's ``weight`` (and ``bias``) by their last name part."""
        loaded = set()
        for name, param in self.proj.named_parameters():
            tensor = tensors.get(name)
            if tensor is None:
                raise ValueError(f"checkpoint lacks {PROJECTION}.{name}")
            if tuple(tensor.shape) != tuple(param.shape):
                raise ValueError(
                    f"{PROJECTION}.{name}: checkpoint {tuple(tensor.shape)} vs {tuple(param.shape)}"
                )
            with torch.no_grad():
                param.copy_(tensor.to(device=param.device, dtype=param.dtype))
            loaded.add(f"proj.{name}")
        return loaded

    def forward(
        self, hidden_states: Sequence[torch.Tensor], requests: Sequence[PoolerRequest]
    ) -> list[torch.Tensor]:
        sizes = [h.shape[0] for h in hidden_states]
        # One matmul for the whole step, then split: the outputs own fresh storage.
        flat = torch.cat(list(hidden_states), dim=0).to(self.proj.weight.dtype)
        projected = F.normalize(self.proj(flat), p=2, dim=-1)
        return list(torch.split(projected, sizes))
