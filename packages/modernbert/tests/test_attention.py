"""Both attention layouts agree with a plain per-sequence reference."""

import pytest
import torch
from vllm_factory.backbones.modernbert.attention import LengthGroups, PackedBatch, packed_attention

LENGTHS = [5, 32, 32, 17, 40, 1]
HEADS, DIM = 2, 8


def reference(q, k, v, lengths, hidden, half_window, scale):
    outs, start = [], 0
    for length in lengths:
        sl = slice(start, start + length)
        scores = torch.einsum("qhd,khd->hqk", q[sl], k[sl]) * scale
        visible = ~hidden[sl].view(1, 1, length).expand(HEADS, length, length)
        if half_window is not None:
            idx = torch.arange(length)
            visible = visible & ((idx[:, None] - idx[None, :]).abs() <= half_window)
        scores = scores.masked_fill(~visible, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # key-less rows -> 0
        outs.append(torch.einsum("hqk,khd->qhd", weights, v[sl]).reshape(length, -1))
        start += length
    return torch.cat(outs)


@pytest.mark.parametrize("layout", [PackedBatch, LengthGroups])
@pytest.mark.parametrize("half_window", [None, 4])
@pytest.mark.parametrize("with_hidden", [False, True])
def test_layouts_match_reference(layout, half_window, with_hidden):
    torch.manual_seed(0)
    total = sum(LENGTHS)
    q, k, v = (torch.randn(total, HEADS, DIM) for _ in range(3))
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    hidden = torch.zeros(total, dtype=torch.bool)
    if with_hidden:  # the tail of the two 32-token "queries" is hidden as keys
        hidden[5 + 20 : 5 + 32] = True
        hidden[5 + 32 + 10 : 5 + 64] = True
    batch = layout.from_positions(positions, hidden if with_hidden else None)
    out = packed_attention(q, k, v, batch, DIM**-0.5, half_window)
    expected = reference(q, k, v, LENGTHS, hidden, half_window, DIM**-0.5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
