"""T5's bucketed relative position bias, bidirectional (encoder) form.

Relative distances ``key - query`` fall in ``num_buckets`` buckets: half for keys after the
query, half for keys before it. Within each half, small distances get one bucket each and
larger ones share log-spaced buckets up to ``max_distance``; everything farther shares the
last bucket. Each bucket holds one learned scalar per head, added to the attention scores
of every layer (the table lives in the first layer only).
"""

from __future__ import annotations

import math

import torch


def relative_position_bucket(
    relative_position: torch.Tensor, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """Bucket ids (long, same shape) for integer ``key - query`` distances."""
    half = num_buckets // 2
    # keys after the query use the upper half of the buckets
    bucket = (relative_position > 0).long() * half
    distance = relative_position.abs()
    exact = half // 2  # distances below this get a bucket of their own
    # log-spaced buckets for [exact, max_distance); clamp(min=1) keeps log() finite where
    # the small-distance branch is taken anyway
    scaled = torch.log(distance.clamp(min=1).float() / exact) / math.log(max_distance / exact)
    far = exact + (scaled * (half - exact)).long()
    far = far.clamp(max=half - 1)
    return bucket + torch.where(distance < exact, distance, far)


def position_bias(
    table: torch.Tensor,
    length: int,
    num_buckets: int,
    max_distance: int,
    heads: slice | None = None,
) -> torch.Tensor:
    """``[H, length, length]`` additive bias from the ``[num_buckets, H]`` ``table``.

    The bias depends only on ``key - query``, so the bias of a shorter sequence is the
    top-left corner of this one: one call per forward serves every sequence.
    """
    idx = torch.arange(length, device=table.device)
    buckets = relative_position_bucket(idx[None, :] - idx[:, None], num_buckets, max_distance)
    if heads is not None:
        table = table[:, heads]
    return table[buckets].permute(2, 0, 1).contiguous()
