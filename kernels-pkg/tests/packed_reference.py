"""Dense references for the packed-batch ops: the whole ``[T]`` batch attends at once through
a ``[T, T]`` mask of allowed (query, key) pairs, in float64; a query with no key gets zeros."""

from __future__ import annotations

import torch


def packed_case(lengths: list[int], heads: int = 2, dim: int = 16, seed: int = 0):
    """q, k, v as an encoder makes them (strided views of one fused projection) and the
    positions of the packed sequences ``lengths``."""
    qkv = torch.randn(sum(lengths), 3, heads, dim, generator=torch.Generator().manual_seed(seed))
    positions = torch.cat([torch.arange(n) for n in lengths])
    return (*qkv.unbind(1), positions)


def allowed(
    positions: torch.Tensor,
    hidden: torch.Tensor | None = None,
    half_window: int | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """``[T, T]`` bool: key j is in query i's sequence, not hidden, in the window / causal."""
    seq = torch.cumsum((positions == 0).long(), 0)
    mask = seq[:, None] == seq[None, :]
    if hidden is not None:
        mask &= ~hidden[None, :]
    offset = positions[None, :] - positions[:, None]  # key - query within a sequence
    if half_window is not None:
        mask &= offset.abs() <= half_window
    if causal:
        mask &= offset <= 0
    return mask


def dense_attention(q, k, v, mask, scale: float, bias: torch.Tensor | None = None):
    """``[T, H * D]``; ``bias`` ``[H, T, T]`` joins the scores before the mask."""
    scores = torch.einsum("qhd,khd->hqk", q.double(), k.double()) * scale
    if bias is not None:
        scores = scores + bias.double()
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("hqk,khd->qhd", weights, v.double()).reshape(q.shape[0], -1)
