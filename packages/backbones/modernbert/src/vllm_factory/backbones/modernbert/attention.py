"""Bidirectional attention over vLLM's packed token batch.

vLLM hands an encoder one flat batch of tokens with per-token positions. Whole prompts are
scheduled at once for encoder-only pooling models (no chunked prefill), so every sequence
starts where its position is 0. We group the sequences once per forward, build the key masks
(optional per-sequence hidden keys, sliding window) and run
``scaled_dot_product_attention`` per layer. Owning the mask is what lets a query's expansion
tokens stay invisible as keys, exactly as PyLate's attention mask makes them.

The layouts, chosen per forward (``attention_batch``):
- CPU, ``LengthGroups``: vLLM's C++ CPU attention kernel for sequences whose keys are all
  visible; SDPA on unpadded views for the others. Every FLOP counts on a CPU.
- GPU, ``VarlenBatch`` (``cuda_kernel``): vLLM's FlashAttention over the unpadded batch, with
  the sliding window done by the kernel, when no key is hidden and the dtype is fp16 / bf16.
- GPU otherwise, ``PackedBatch``: one padded ``[B, L]`` SDPA call per layer with a key mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from vllm_factory.backbones.modernbert.cpu_kernel import KernelBatch, kernel_supports
from vllm_factory.backbones.modernbert.cuda_kernel import VarlenBatch, flash_supports
from vllm_factory.core.packing import PackedLayout


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
    """CPU layout. Sequences whose keys are all visible go through vLLM's C++ CPU attention
    kernel in one call per layer (``cpu_kernel``) when the installed vLLM has it. The rest
    (sequences with hidden keys, or everything without the kernel) go by runs of adjacent
    equal-length sequences: one unpadded ``[G, H, L, D]`` SDPA call per run on a view of the
    packed batch. Queries, all expanded to one length and usually scheduled together, share
    a call."""

    runs: list[_Run]  # the runs attended with SDPA
    total: int
    kernel: KernelBatch | None = None  # the sequences attended by vLLM's kernel
    kernel_index: torch.Tensor | None = None  # their tokens, when not all tokens are theirs

    @classmethod
    def from_positions(
        cls,
        positions: torch.Tensor,
        hidden_keys: torch.Tensor | None = None,
        head_dim: int | None = None,
    ) -> LengthGroups:
        """``head_dim`` (when given and supported) enables vLLM's CPU kernel."""
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
        if head_dim is None or not kernel_supports(head_dim):
            return cls(runs, total)
        plain = [run for run in runs if run.keys is None]
        if not plain:
            return cls(runs, total)
        kernel = KernelBatch.from_lengths(
            [run.length for run in plain for _ in range(run.size)], positions.device
        )
        index = None
        if len(plain) < len(runs):
            index = torch.cat(
                [torch.arange(r.start, r.start + r.size * r.length) for r in plain]
            ).to(positions.device)
        masked = [run for run in runs if run.keys is not None]
        return cls(masked, total, kernel, index)

    def attend(self, q, k, v, scale: float, half_window: int | None) -> torch.Tensor:
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
            if blind is not None:
                o = o.masked_fill(blind, 0.0)  # see packed_attention
            out[span].view(shape).copy_(o.transpose(1, 2))
        return out


def attention_batch(
    positions: torch.Tensor,
    hidden_keys: torch.Tensor | None = None,
    head_dim: int | None = None,
    dtype: torch.dtype | None = None,
) -> PackedBatch | LengthGroups | VarlenBatch:
    """The per-forward attention layout for this device (see the module docstring)."""
    if not positions.is_cuda:
        return LengthGroups.from_positions(positions, hidden_keys, head_dim)
    plain = hidden_keys is None or not bool(hidden_keys.any())
    if plain and head_dim is not None and dtype is not None and flash_supports(dtype, head_dim):
        return VarlenBatch.from_positions(positions)
    return PackedBatch.from_positions(positions, hidden_keys)


def packed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    batch: PackedBatch | LengthGroups | VarlenBatch,
    scale: float,
    half_window: int | None = None,
) -> torch.Tensor:
    """Attention for packed ``[T, H, D]`` q/k/v; returns ``[T, H * D]``."""
    if isinstance(batch, LengthGroups | VarlenBatch):
        return batch.attend(q, k, v, scale, half_window)
    heads, head_dim = q.shape[1], q.shape[2]
    qp, kp, vp = (batch.pad(t).transpose(1, 2) for t in (q, k, v))  # [B, H, L, D]
    mask, blind = batch.mask(half_window)
    out = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, scale=scale)
    if blind is not None:
        # A query that may see no key (an expansion token beyond a sliding window, or
        # padding) gets a zero output, as torch's CPU SDPA (and so PyLate) gives it;
        # other backends may return NaN there.
        out = out.masked_fill(blind, 0.0)
    return batch.unpad(out.transpose(1, 2)).reshape(-1, heads * head_dim)
