"""LFM2's causal attention over vLLM's packed token batch, and its split-point op.

vLLM hands a pooling model one flat ``[T]`` batch of whole prompts (no chunked prefill for
encoder-only models), so a sequence starts wherever its position is 0. Attention works on runs
of consecutive sequences of equal length, each a free view ``[G, L]`` of the packed batch
(:class:`PackedSequences`, also read by LFM2's short convolution for its hidden tokens).

``vllm_factory::lfm2_causal_attention`` (:data:`LFM2_ATTENTION_OP`) is the split point of the
compiled encoder: no vLLM attention backend is causal without a KV cache, so the op runs SDPA
per run, eagerly between the graph's pieces, with the layout read from the positions once per
model step (the step cache a backbone installs, ``packed_step_cache``). It writes into an
output buffer the piece before it allocated: under piecewise CUDA graphs the piece after it
replays reading the addresses seen at capture, so a fresh output tensor would be read from a
stale buffer. Pure torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from vllm_factory.core.packing import PackedLayout

from .packed_step_cache import step_cached

LFM2_ATTENTION_OP = "vllm_factory::lfm2_causal_attention"


@dataclass
class Run:
    """Consecutive sequences of one length: packed rows ``[start, start + size * length)``."""

    start: int
    size: int
    length: int
    keys: torch.Tensor | None = None  # [size, 1, 1, length] visible keys; None: all visible
    _mask: torch.Tensor | None = field(default=None, repr=False)

    @property
    def span(self) -> slice:
        return slice(self.start, self.start + self.size * self.length)

    def causal_mask(self) -> torch.Tensor:
        """``[size, 1, L, L]`` causal mask restricted to visible keys (built once)."""
        if self._mask is None:
            assert self.keys is not None
            tril = torch.ones(self.length, self.length, dtype=torch.bool, device=self.keys.device)
            self._mask = self.keys & tril.tril().view(1, 1, self.length, self.length)
        return self._mask


@dataclass
class PackedSequences:
    positions: torch.Tensor  # [T]
    hidden: torch.Tensor | None  # [T] bool: padding-like tokens (attention_mask 0 in PyLate)
    runs: list[Run]

    @classmethod
    def from_positions(
        cls, positions: torch.Tensor, hidden: torch.Tensor | None = None
    ) -> PackedSequences:
        runs = [Run(r.start, r.size, r.length) for r in PackedLayout(positions).runs]
        if hidden is not None and bool(hidden.any()):
            for run in runs:
                part = hidden[run.span]
                if bool(part.any()):
                    run.keys = (~part).view(run.size, 1, 1, run.length)
        else:
            hidden = None
        return cls(positions, hidden, runs)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    batch: PackedSequences,
    scale: float,
    out: torch.Tensor,
) -> None:
    """Causal attention of each packed sequence, ``[T, H, D]``, written into ``out`` (``k`` /
    ``v`` already repeated to the query heads)."""
    heads, head_dim = q.shape[1], q.shape[2]
    for run in batch.runs:
        shape = (run.size, run.length, heads, head_dim)
        qr, kr, vr = (t[run.span].view(shape).transpose(1, 2) for t in (q, k, v))
        if run.keys is None:
            o = F.scaled_dot_product_attention(qr, kr, vr, is_causal=True, scale=scale)
        else:
            mask = run.causal_mask()
            o = F.scaled_dot_product_attention(qr, kr, vr, attn_mask=mask, scale=scale)
        out[run.span].view(shape).copy_(o.transpose(1, 2))


@torch.library.custom_op(LFM2_ATTENTION_OP, mutates_args=("out",))
def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    positions: torch.Tensor,
    scale: float,
    out: torch.Tensor,
) -> None:
    """:func:`attend` with the layout read from ``positions`` (once per step)."""
    batch = step_cached("lfm2", positions, lambda: PackedSequences.from_positions(positions))
    attend(q, k, v, batch, scale, out)


@causal_attention.register_fake
def _(q, k, v, positions, scale, out) -> None:
    return None
