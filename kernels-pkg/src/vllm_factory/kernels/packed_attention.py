"""Bidirectional attention over vLLM's packed token batch, with keys a caller may hide.

vLLM hands an encoder one flat batch of tokens with per-token positions. Whole prompts are
scheduled at once for encoder-only pooling models (no chunked prefill), so every sequence
starts where its position is 0. A layout groups the sequences once per forward and builds the
key masks (optional per-sequence hidden keys, a two-sided sliding window of ``half_window``);
each layer then runs ``scaled_dot_product_attention`` through :func:`packed_attention`. Owning
the mask is what lets a query's expansion tokens stay invisible as keys, exactly as PyLate's
attention mask makes them.

The layouts (:func:`attention_batch` picks one per device):

- CPU, :class:`LengthGroups`: one unpadded SDPA call per run of adjacent equal-length
  sequences (a view of the packed batch). A caller may hand it a fused kernel over whole
  sequences (``fused``, e.g. an engine's CPU attention kernel) for the sequences whose keys are
  all visible.
- Otherwise, :class:`PackedBatch`: one padded ``[B, L]`` SDPA call per layer with a key mask.

Any other object with the same ``attend(q, k, v, scale, half_window)`` (a varlen kernel's
layout, say) goes through :func:`packed_attention` as well. A query that may see no key (an
expansion token beyond a sliding window, or padding) gets a zero output, as torch's CPU SDPA
(and so PyLate) gives it; other SDPA backends may return NaN there. Pure torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor
from vllm_factory.core.packing import PackedLayout


class FusedKernel(Protocol):
    """Attention over whole unpadded sequences with every key visible (no per-key mask)."""

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, out: Tensor, scale: float, half_window: int | None
    ) -> None:
        """Attention of ``[T, H, D]`` q/k/v (its sequences' tokens only) into ``out``."""


# The sequence lengths (in packed order) and device -> a fused kernel over those sequences.
FusedFactory = Callable[[list[int], torch.device], FusedKernel]


class Layout(Protocol):
    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, scale: float, half_window: int | None
    ) -> Tensor: ...


def _zero_blind(out: torch.Tensor, blind: torch.Tensor | None) -> torch.Tensor:
    """Queries that see no key get zeros (see the module docstring)."""
    return out if blind is None else out.masked_fill(blind, 0.0)


@dataclass
class PackedBatch:
    """Index maps between the packed ``[T]`` token batch and a padded ``[B, L]`` batch."""

    flat_index: torch.Tensor  # [T] position of each packed token in the flattened [B*L]
    key_mask: torch.Tensor  # [B, 1, 1, L] True where a key may be attended
    batch: int
    length: int
    _window_masks: dict[int | None, tuple[torch.Tensor, torch.Tensor | None]]

    @classmethod
    def from_positions(
        cls, positions: torch.Tensor, hidden_keys: torch.Tensor | None = None
    ) -> PackedBatch:
        """Build from vLLM positions; ``hidden_keys`` [T] bool marks keys nobody may see."""
        device = positions.device
        total = positions.numel()
        layout = PackedLayout(positions)
        batch, length = layout.num_seqs, layout.max_seqlen
        flat_index = layout.seq_of_token * length + positions.long()

        valid = torch.zeros(batch * length, dtype=torch.bool, device=device)
        visible = torch.ones(total, dtype=torch.bool, device=device)
        if hidden_keys is not None:
            visible = ~hidden_keys
        valid[flat_index] = visible
        return cls(
            flat_index=flat_index,
            key_mask=valid.view(batch, 1, 1, length),
            batch=batch,
            length=length,
            _window_masks={},
        )

    def pad(self, packed: torch.Tensor) -> torch.Tensor:
        """``[T, ...]`` -> ``[B, L, ...]`` (zeros where a sequence is shorter)."""
        out = packed.new_zeros((self.batch * self.length, *packed.shape[1:]))
        out[self.flat_index] = packed
        return out.view(self.batch, self.length, *packed.shape[1:])

    def unpad(self, padded: torch.Tensor) -> torch.Tensor:
        """``[B, L, ...]`` -> ``[T, ...]``."""
        return padded.reshape(self.batch * self.length, *padded.shape[2:])[self.flat_index]

    def mask(self, half_window: int | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Boolean attention mask (``half_window`` limits |query - key|, the sliding window)
        and the ``[B, 1, L, 1]`` rows that see no key at all (None when there are none)."""
        if half_window is not None and half_window >= self.length:
            half_window = None
        cached = self._window_masks.get(half_window)
        if cached is None:
            mask = self.key_mask
            if half_window is not None:
                idx = torch.arange(self.length, device=mask.device)
                band = (idx[:, None] - idx[None, :]).abs() <= half_window
                mask = mask & band.view(1, 1, self.length, self.length)
            blind = ~mask.any(dim=-1, keepdim=True)
            cached = (mask, blind if bool(blind.any()) else None)
            self._window_masks[half_window] = cached
        return cached

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, scale: float, half_window: int | None
    ) -> Tensor:
        """Attention for packed ``[T, H, D]`` q/k/v; returns ``[T, H * D]``."""
        heads, head_dim = q.shape[1], q.shape[2]
        qp, kp, vp = (self.pad(t).transpose(1, 2) for t in (q, k, v))  # [B, H, L, D]
        mask, blind = self.mask(half_window)
        out = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, scale=scale)
        out = _zero_blind(out, blind)
        return self.unpad(out.transpose(1, 2)).reshape(-1, heads * head_dim)


def _masks(
    keys: torch.Tensor | None, length: int, half_window: int | None, device: torch.device
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(mask, blind rows) for ``[G, 1, 1, L]`` visible ``keys`` and an optional window."""
    if half_window is not None and length - 1 <= half_window:
        half_window = None
    if keys is None and half_window is None:
        return None, None  # full attention: SDPA's fused kernel
    mask = (
        keys if keys is not None else torch.ones(1, 1, 1, length, dtype=torch.bool, device=device)
    )
    if half_window is not None:
        idx = torch.arange(length, device=device)
        band = (idx[:, None] - idx[None, :]).abs() <= half_window
        mask = mask & band.view(1, 1, length, length)
    blind = ~mask.any(dim=-1, keepdim=True)
    return mask, (blind if bool(blind.any()) else None)


@dataclass
class _Run:
    """Consecutive sequences of one length: a view ``[start, start + size * length)``."""

    start: int
    size: int  # sequences
    length: int  # tokens each
    device: torch.device
    keys: torch.Tensor | None = None  # [size, 1, 1, length] visible keys; None: all visible
    masks: dict = field(default_factory=dict)

    def mask(self, half_window: int | None):
        if half_window not in self.masks:
            self.masks[half_window] = _masks(self.keys, self.length, half_window, self.device)
        return self.masks[half_window]


@dataclass
class LengthGroups:
    """CPU layout. Runs of adjacent equal-length sequences, one unpadded ``[G, H, L, D]`` SDPA
    call per run on a view of the packed batch (queries, all expanded to one length and
    usually scheduled together, share a call). With a ``fused`` kernel, the sequences whose
    keys are all visible go through it instead, in one call per layer."""

    runs: list[_Run]  # the runs attended with SDPA
    total: int
    kernel: FusedKernel | None = None  # the sequences attended by the fused kernel
    kernel_index: torch.Tensor | None = None  # their tokens, when not all tokens are theirs

    @classmethod
    def from_positions(
        cls,
        positions: torch.Tensor,
        hidden_keys: torch.Tensor | None = None,
        fused: FusedFactory | None = None,
    ) -> LengthGroups:
        total = positions.numel()
        runs = [
            _Run(run.start, run.size, run.length, positions.device)
            for run in PackedLayout(positions).runs
        ]
        if hidden_keys is not None:
            for run in runs:
                hidden = hidden_keys[run.start : run.start + run.size * run.length]
                if bool(hidden.any()):
                    run.keys = (~hidden).view(run.size, 1, 1, run.length)
        if fused is None:
            return cls(runs, total)
        plain = [run for run in runs if run.keys is None]
        if not plain:
            return cls(runs, total)
        kernel = fused([run.length for run in plain for _ in range(run.size)], positions.device)
        index = None
        if len(plain) < len(runs):
            index = torch.cat(
                [torch.arange(r.start, r.start + r.size * r.length) for r in plain]
            ).to(positions.device)
        masked = [run for run in runs if run.keys is not None]
        return cls(masked, total, kernel, index)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, scale: float, half_window: int | None
    ) -> Tensor:
        """Attention for packed ``[T, H, D]`` q/k/v; returns ``[T, H * D]``."""
        tokens, heads, head_dim = q.shape
        out = q.new_empty(tokens, heads * head_dim)
        if self.kernel is not None:
            if self.kernel_index is None:
                self.kernel.attend(q, k, v, out.view(tokens, heads, head_dim), scale, half_window)
            else:
                index = self.kernel_index
                part = q.new_empty(index.numel(), heads, head_dim)
                self.kernel.attend(q[index], k[index], v[index], part, scale, half_window)
                out.view(tokens, heads, head_dim).index_copy_(0, index, part)
        for run in self.runs:
            span = slice(run.start, run.start + run.size * run.length)
            shape = (run.size, run.length, heads, head_dim)
            qr, kr, vr = (t[span].view(shape).transpose(1, 2) for t in (q, k, v))
            mask, blind = run.mask(half_window)
            o = F.scaled_dot_product_attention(qr, kr, vr, attn_mask=mask, scale=scale)
            o = _zero_blind(o, blind)
            out[span].view(shape).copy_(o.transpose(1, 2))
        return out


def attention_batch(
    positions: torch.Tensor,
    hidden_keys: torch.Tensor | None = None,
    fused: FusedFactory | None = None,
) -> PackedBatch | LengthGroups:
    """The per-forward layout for the device of ``positions``: :class:`LengthGroups` off CUDA
    (with ``fused`` for the sequences whose keys are all visible), else :class:`PackedBatch`."""
    if not positions.is_cuda:
        return LengthGroups.from_positions(positions, hidden_keys, fused)
    return PackedBatch.from_positions(positions, hidden_keys)


def packed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    batch: Layout,
    scale: float,
    half_window: int | None = None,
) -> torch.Tensor:
    """Attention for packed ``[T, H, D]`` q/k/v on ``batch``'s layout; returns ``[T, H * D]``."""
    return batch.attend(q, k, v, scale, half_window)
