"""Sequence bookkeeping for vLLM's packed token batch, shared by every layer of a forward.

vLLM hands a pooling model one flat ``[T]`` batch of whole prompts (no chunked prefill for
encoder-only models), so a sequence starts wherever its position is 0. The short
convolution uses ``positions`` directly (a token may only read the ``k``-th previous token
when its own position is at least ``k``); attention works on runs of consecutive sequences
of equal length, each a free view ``[G, L]`` of the packed batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from vllm_factory.core.packing import PackedLayout


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
