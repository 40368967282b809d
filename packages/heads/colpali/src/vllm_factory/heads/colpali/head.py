"""The ColPali head: one linear projection of every token's hidden state, then L2
normalisation (colpali-engine's ``custom_text_proj``); or, for retrievers with no projection
(Nemotron ColEmbed), the L2 normalisation alone (:class:`TokenNormHead`). Pure torch; no vLLM.

Its weights sit in the checkpoint's own safetensors beside the backbone's, and its width is
not in ``config.json`` (colpali-engine fixes it in code), so :func:`projection_shape` reads it
from the safetensors headers before the weights load. A library that saves the projection apart,
in a torch file beside the backbone's weights (sauerkrautlm-colpali's ColLFM2:
``collfm2_projection.pt``), names that file (:func:`projection_file_tensors`).
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


def projection_file_tensors(files: CheckpointFiles, name: str) -> dict[str, torch.Tensor] | None:
    """The projection's tensors by their last name part (``weight``, ``bias``) from the torch
    file ``name`` of the checkpoint, saved as ``{"custom_text_proj": state_dict, ...}`` (read with
    ``weights_only``: tensors and plain values, no code); None where the checkpoint has no such
    file."""
    path = files.path(name)
    if path is None:
        return None
    saved = torch.load(path, map_location="cpu", weights_only=True)
    state = saved.get(PROJECTION) if isinstance(saved, dict) else None
    if not isinstance(state, dict) or "weight" not in state:
        raise ValueError(f"{files.model}/{name}: no {PROJECTION} state dict with a weight")
    return {key: value for key, value in state.items() if key in ("weight", "bias")}


def read_projection(
    files: CheckpointFiles, projection_file: str | None = None
) -> tuple[ProjectionShape, dict[str, torch.Tensor] | None]:
    """The projection's shape as the checkpoint stores it (under any prefix), or, where the
    safetensors hold none, as ``projection_file`` (:func:`projection_file_tensors`) does; with
    that file's tensors (read once, kept for ``load_weights``), else None."""
    shapes = safetensors_shapes(files)
    weight = [k for k in shapes if k.endswith(f"{PROJECTION}.weight")]
    if not weight and projection_file is not None:
        tensors = projection_file_tensors(files, projection_file)
        if tensors is not None:
            out_features, in_features = tensors["weight"].shape
            return ProjectionShape(in_features, out_features, "bias" in tensors), tensors
    if len(weight) != 1:
        raise ValueError(f"{files.model}: expected one {PROJECTION}.weight tensor, found {weight}")
    out_features, in_features = shapes[weight[0]]
    bias = weight[0].removesuffix("weight") + "bias" in shapes
    return ProjectionShape(in_features, out_features, bias), None


def projection_shape(files: CheckpointFiles, projection_file: str | None = None) -> ProjectionShape:
    """:func:`read_projection`'s shape alone."""
    return read_projection(files, projection_file)[0]


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


class TokenNormHead(FactoryPooler):
    """Every token's hidden state L2-normalised, no projection (retrievers whose token vectors
    are the backbone's own, e.g. Nemotron ColEmbed); returns every token of every sequence."""

    def __init__(self, dim: int, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.hidden_size = dim
        self.dtype = dtype

    @property
    def dim(self) -> int:
        return self.hidden_size

    def load_checkpoint_weights(self, tensors: dict[str, torch.Tensor]) -> set[str]:
        """No weights; a projection in the checkpoint would be one this model does not apply."""
        if tensors:
            raise ValueError(f"unexpected projection weights {sorted(tensors)}")
        return set()

    def forward(
        self, hidden_states: Sequence[torch.Tensor], requests: Sequence[PoolerRequest]
    ) -> list[torch.Tensor]:
        sizes = [h.shape[0] for h in hidden_states]
        flat = torch.cat(list(hidden_states), dim=0)
        if self.dtype is not None:
            flat = flat.to(self.dtype)
        # normalize allocates: the outputs own fresh storage, as the contract asks.
        return list(torch.split(F.normalize(flat, p=2, dim=-1), sizes))
