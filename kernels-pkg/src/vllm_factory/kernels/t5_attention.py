"""Bidirectional T5 attention over vLLM's packed token batch, and its split-point op.

vLLM hands an encoder one flat batch of whole prompts, back to back; a sequence starts where
its position is 0. T5 adds a learned relative position bias to the (unscaled) scores, so no
fused varlen kernel applies (FlashAttention and vLLM's CPU kernel take no arbitrary bias):
each forward we group the sequences once and run ``scaled_dot_product_attention`` per group
with an additive mask, built once and shared by every layer (T5 shares the bias too).

A group is a set of sequences padded to its longest one. Sequences of one length need no
padding, and when they are also adjacent in the batch, q/k/v are views of it (no copy).
``min_fill`` says how short a sequence may be to join a longer one's group: on CPU every
padded score is paid for, so only equal lengths group (1.0); on GPU fewer, larger calls pay.

``vllm_factory::t5_attention`` (:data:`T5_ATTENTION_OP`) is the split point of a compiled T5
encoder: it reads the groups from the positions on the host, once per model step through the
step cache the backbone installs (``packed_step_cache``), and writes into an output buffer the
graph piece before it allocated (under piecewise CUDA graphs the piece after it replays reading
the addresses seen at capture). Pure torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import torch
import torch.nn.functional as F
from vllm_factory.core.packing import PackedLayout

from .packed_step_cache import step_cached
from .t5_position_bias import position_bias

T5_ATTENTION_OP = "vllm_factory::t5_attention"

# Materialised [G, H, L, L] masks of padded groups stay below this many elements.
MAX_MASK_ELEMENTS = 1 << 27

BiasFn = Callable[[int], torch.Tensor]  # length -> [H, length, length]


@dataclass
class _Group:
    size: int  # sequences
    length: int  # padded length
    mask: torch.Tensor  # [1 or size, H, length, length] additive
    start: int | None = None  # adjacent, equal lengths: tokens [start, start + size * length)
    index: torch.Tensor | None = None  # otherwise: [size * length] packed token of each slot
    valid: torch.Tensor | None = None  # padded groups: [size * length] slots of real tokens
    target: torch.Tensor | None = None  # padded groups: index[valid]


def sequence_lengths(positions: torch.Tensor) -> tuple[list[int], list[int]]:
    """Start offsets and lengths of the sequences in a packed batch (one host sync)."""
    layout = PackedLayout(positions)
    return layout.host_starts, layout.host_lengths


def _plan(lengths: list[int], min_fill: float, heads: int) -> list[list[int]]:
    """Sequence ids per group, longest first; each in packed order."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for i in order:
        if groups:
            group = groups[-1]
            longest = lengths[group[0]]
            padded = lengths[i] < longest or lengths[group[-1]] < longest
            fits = not padded or (len(group) + 1) * heads * longest**2 <= MAX_MASK_ELEMENTS
            if lengths[i] >= min_fill * longest and fits:
                group.append(i)
                continue
        groups.append([i])
    return [sorted(group) for group in groups]


@dataclass
class SequenceGroups:
    """The per-forward attention layout: groups of sequences and their bias masks."""

    groups: list[_Group]
    unowned: int = 0  # tokens before the first sequence start (a dummy run's stale positions)

    @classmethod
    def from_positions(
        cls, positions: torch.Tensor, bias: BiasFn, heads: int, min_fill: float | None = None
    ) -> SequenceGroups:
        """``bias(L)`` gives the ``[H, L, L]`` bias in the model dtype; ``min_fill`` defaults
        per device."""
        if min_fill is None:
            min_fill = 0.8 if positions.is_cuda else 1.0
        starts, lengths = sequence_lengths(positions)
        if not lengths:
            return cls([], positions.numel())
        device = positions.device
        full = bias(max(lengths))  # every sequence's bias is a corner of the longest one's
        groups = []
        for members in _plan(lengths, min_fill, heads):
            length = max(lengths[i] for i in members)
            # contiguous: GPU memory-efficient SDPA wants a dense last dim
            mask = full[:, :length, :length].unsqueeze(0).contiguous()
            same = all(lengths[i] == length for i in members)
            adjacent = all(starts[b] == starts[a] + length for a, b in pairwise(members))
            if same and adjacent:
                groups.append(_Group(len(members), length, mask, start=starts[members[0]]))
                continue
            slot = torch.arange(length)
            first = torch.tensor([starts[i] for i in members])[:, None]
            real = slot[None, :] < torch.tensor([lengths[i] for i in members])[:, None]
            # padded slots read the sequence's first token; their keys are masked out and
            # their outputs dropped
            index = torch.where(real, first + slot[None, :], first).flatten().to(device)
            group = _Group(len(members), length, mask, index=index)
            if not same:
                group.mask = mask.masked_fill(~real.to(device)[:, None, None, :], float("-inf"))
                group.valid = real.flatten().to(device)
                group.target = index[group.valid]
            groups.append(group)
        return cls(groups, starts[0])

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Unscaled biased attention for packed ``[T, H, D]`` q/k/v, written into ``out``
        (``[T, H, D]``, a new tensor if None); returns it as ``[T, H * D]``."""
        tokens, heads, head_dim = q.shape
        if out is None:
            out = q.new_empty(tokens, heads, head_dim)
        if self.unowned:  # rows no sequence owns: zeros rather than a buffer's old contents
            out[: self.unowned].zero_()
        for g in self.groups:
            shape = (g.size, g.length, heads, head_dim)
            if g.start is not None:
                span = slice(g.start, g.start + g.size * g.length)
                qg, kg, vg = (t[span].view(shape).transpose(1, 2) for t in (q, k, v))
            else:
                qg, kg, vg = (t[g.index].view(shape).transpose(1, 2) for t in (q, k, v))
            # T5 folds 1/sqrt(d) into its weights: no scaling
            o = F.scaled_dot_product_attention(qg, kg, vg, attn_mask=g.mask, scale=1.0)
            o = o.transpose(1, 2)
            if g.start is not None:
                out[span].view(shape).copy_(o)
            elif g.valid is None:
                out[g.index] = o.reshape(-1, heads, head_dim)
            else:
                out[g.target] = o.reshape(-1, heads, head_dim)[g.valid]
        return out.view(tokens, heads * head_dim)


@torch.library.custom_op(T5_ATTENTION_OP, mutates_args=("out",))
def t5_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    positions: torch.Tensor,
    table: torch.Tensor,
    num_buckets: int,
    max_distance: int,
    first_head: int,
    min_fill: float | None,
    out: torch.Tensor,
) -> None:
    """Biased attention of packed ``[T, H, D]`` q/k/v (this rank's ``H`` heads from
    ``first_head``; ``table`` ``[num_buckets, all heads]``) into ``out``."""
    heads = q.shape[1]
    local = slice(first_head, first_head + heads)

    def bias(length: int) -> torch.Tensor:
        return position_bias(table, length, num_buckets, max_distance, local).to(q.dtype)

    groups = step_cached(
        ("t5", num_buckets, max_distance, first_head, min_fill, q.dtype),
        positions,
        lambda: SequenceGroups.from_positions(positions, bias, heads, min_fill),
    )
    groups.attend(q, k, v, out)


@t5_attention.register_fake
def _(q, k, v, positions, table, num_buckets, max_distance, first_head, min_fill, out):
    return None
