"""Bidirectional attention over vLLM's packed token batch.

vLLM hands an encoder one flat batch of tokens with per-token positions. Whole prompts are
scheduled at once for encoder-only pooling models (no chunked prefill), so every sequence
starts where its position is 0. We pad the batch once per forward into ``[B, L]``, build the
key masks (padding, optional per-sequence masked keys, sliding window) and run
``scaled_dot_product_attention`` per layer. Owning the mask is what lets a query's expansion
tokens stay invisible as keys, exactly as PyLate's attention mask makes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class PackedBatch:
    """Index maps between the packed ``[T]`` token batch and a padded ``[B, L]`` batch."""

    flat_index: torch.Tensor  # [T] position of each packed token in the flattened [B*L]
    key_mask: torch.Tensor  # [B, 1, 1, L] True where a key may be attended
    positions_padded: torch.Tensor  # [B, L] token positions (0 beyond a sequence's end)
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
        starts = torch.nonzero(positions == 0, as_tuple=False).flatten()
        lengths = torch.diff(starts, append=torch.tensor([total], device=device))
        batch = int(starts.numel())
        length = int(lengths.max().item()) if batch else 0
        seq_of_token = torch.repeat_interleave(torch.arange(batch, device=device), lengths)
        flat_index = seq_of_token * length + positions.long()

        valid = torch.zeros(batch * length, dtype=torch.bool, device=device)
        visible = torch.ones(total, dtype=torch.bool, device=device)
        if hidden_keys is not None:
            visible = ~hidden_keys
        valid[flat_index] = visible
        positions_padded = torch.zeros(batch * length, dtype=torch.long, device=device)
        positions_padded[flat_index] = positions.long()
        return cls(
            flat_index=flat_index,
            key_mask=valid.view(batch, 1, 1, length),
            positions_padded=positions_padded.view(batch, length),
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


def packed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    batch: PackedBatch,
    scale: float,
    half_window: int | None = None,
) -> torch.Tensor:
    """Attention for packed ``[T, H, D]`` q/k/v; returns ``[T, H * D]``."""
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
