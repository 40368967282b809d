"""The packed attention layouts against a dense reference, and the per-step layout cache."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from packed_reference import allowed, dense_attention, packed_case
from vllm_factory.kernels import packed_step_cache
from vllm_factory.kernels.packed_attention import (
    LengthGroups,
    PackedBatch,
    attention_batch,
    packed_attention,
)

# adjacent equal lengths (32, 32) form one run; a one-token sequence at the end
LENGTHS = [5, 32, 32, 17, 40, 1]


def hidden_tails(positions: torch.Tensor) -> torch.Tensor:
    """The tails of the two 32-token sequences hidden as keys (ColBERT's query expansion)."""
    hidden = torch.zeros(positions.numel(), dtype=torch.bool)
    hidden[5 + 20 : 5 + 32] = True
    hidden[5 + 32 + 10 : 5 + 64] = True
    return hidden


class SdpaKernel:
    """A stand-in fused kernel (what an engine's CPU kernel does), recording its sequences."""

    made: ClassVar[list[list[int]]] = []

    def __init__(self, lengths: list[int], device: torch.device) -> None:
        self.lengths = lengths
        SdpaKernel.made.append(lengths)

    def attend(self, q, k, v, out, scale, half_window) -> None:
        positions = torch.cat([torch.arange(n) for n in self.lengths])
        mask = allowed(positions, None, half_window)
        out.copy_(dense_attention(q, k, v, mask, scale).view(out.shape).to(out.dtype))


@pytest.mark.parametrize("layout", ["padded", "runs", "runs+fused"])
@pytest.mark.parametrize("half_window", [None, 4])
@pytest.mark.parametrize("with_hidden", [False, True])
def test_layouts_match_dense_reference(layout: str, half_window, with_hidden: bool) -> None:
    q, k, v, positions = packed_case(LENGTHS)
    hidden = hidden_tails(positions) if with_hidden else None
    if layout == "padded":
        batch = PackedBatch.from_positions(positions, hidden)
    else:
        fused = SdpaKernel if layout == "runs+fused" else None
        batch = attention_batch(positions, hidden, fused)  # CPU: runs of equal lengths
        assert isinstance(batch, LengthGroups)
    out = packed_attention(q, k, v, batch, 0.25, half_window)
    expected = dense_attention(q, k, v, allowed(positions, hidden, half_window), 0.25)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


def test_fused_kernel_takes_only_sequences_with_every_key_visible() -> None:
    _, _, _, positions = packed_case(LENGTHS)
    SdpaKernel.made.clear()
    batch = LengthGroups.from_positions(positions, hidden_tails(positions), SdpaKernel)
    assert SdpaKernel.made == [[5, 17, 40, 1]]
    assert [(run.start, run.size, run.length) for run in batch.runs] == [(5, 2, 32)]
    assert batch.kernel_index is not None and batch.kernel_index.numel() == 5 + 17 + 40 + 1
    plain = LengthGroups.from_positions(positions, None, SdpaKernel)
    assert not plain.runs and plain.kernel_index is None


def test_step_cache_is_the_installed_one() -> None:
    calls: list[tuple] = []

    def cache(key, positions, build):
        calls.append(key)
        return build()

    positions = torch.arange(3)
    previous = packed_step_cache.cache_layouts_per_step(cache)
    try:
        assert packed_step_cache.step_cached(("x", 1), positions, lambda: 7) == 7
    finally:
        packed_step_cache.cache_layouts_per_step(previous)
    assert calls == [("x", 1)]
    assert packed_step_cache.step_cached(("x", 1), positions, lambda: 8) == 8
