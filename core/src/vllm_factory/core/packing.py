"""vLLM's packed token batch, read once: whole prompts back to back (encoder-only models run
no chunked prefill), each starting where ``positions == 0``.

Every encoder and head that needs the sequence layout takes it from :class:`PackedLayout`:
device tensors (starts, lengths, ``cu_seqlens``, the sequence of each token) for kernels and
index maps, and, on first use, the host view (one sync) for Python-side grouping: the longest
sequence and the runs of adjacent equal-length sequences. Pure torch; no vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch


@dataclass(frozen=True)
class Run:
    """``size`` adjacent sequences of ``length`` tokens each, from token ``start``."""

    start: int
    size: int
    length: int

    @property
    def end(self) -> int:
        return self.start + self.size * self.length


class PackedLayout:
    """Sequence boundaries of a packed ``[T]`` batch, from its positions."""

    def __init__(self, positions: torch.Tensor) -> None:
        self.positions = positions
        self.total = positions.numel()
        self.device = positions.device
        self.is_start = positions == 0
        self.starts = torch.nonzero(self.is_start, as_tuple=False).flatten()  # [S]
        end = torch.tensor([self.total], device=self.device)
        self.lengths = torch.diff(self.starts, append=end)  # [S]
        self.cu_seqlens = torch.cat((self.starts, end)).to(torch.int32)  # [S + 1]

    @classmethod
    def from_positions(cls, positions: torch.Tensor) -> PackedLayout:
        return cls(positions)

    @property
    def num_seqs(self) -> int:
        return int(self.starts.numel())

    @cached_property
    def seq_of_token(self) -> torch.Tensor:
        """``[T]`` index of each token's sequence."""
        return torch.cumsum(self.is_start.long(), 0) - 1

    @cached_property
    def host_starts(self) -> list[int]:
        return self.starts.tolist()

    @cached_property
    def host_lengths(self) -> list[int]:
        return [
            end - start for start, end in zip(self.host_starts, [*self.host_starts[1:], self.total])
        ]

    @cached_property
    def max_seqlen(self) -> int:
        return max(self.host_lengths, default=0)

    @cached_property
    def runs(self) -> list[Run]:
        """Adjacent sequences of equal length, grouped (queries expanded to one length and
        scheduled together form one run)."""
        runs: list[Run] = []
        for start, length in zip(self.host_starts, self.host_lengths):
            last = runs[-1] if runs else None
            if last is not None and last.length == length:
                runs[-1] = Run(last.start, last.size + 1, length)
            else:
                runs.append(Run(start, 1, length))
        return runs
