"""``vllm_factory::lfm2_causal_attention`` (LFM2's causal attention, its encoder's split point)
against a dense reference, with and without hidden keys."""

from __future__ import annotations

import pytest
import torch
from packed_reference import allowed, dense_attention, packed_case
from vllm_factory.kernels.lfm2_attention import (
    LFM2_ATTENTION_OP,
    PackedSequences,
    attend,
    causal_attention,
)

LENGTHS = [3, 5, 5, 9, 1]


def test_op_writes_into_out_and_returns_nothing() -> None:
    assert LFM2_ATTENTION_OP == "vllm_factory::lfm2_causal_attention"
    schema = torch.ops.vllm_factory.lfm2_causal_attention.default._schema
    assert not schema.returns
    assert [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write] == ["out"]


def test_op_matches_dense_causal_reference() -> None:
    q, k, v, positions = packed_case(LENGTHS)
    out = torch.full_like(q, float("nan"))
    assert causal_attention(q, k, v, positions, 0.5, out) is None
    expected = dense_attention(q, k, v, allowed(positions, causal=True), 0.5)
    torch.testing.assert_close(out.reshape(q.shape[0], -1).double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("hide", [[], [6, 7], [13, 14, 15, 16]])
def test_hidden_keys_are_no_query_s_keys(hide: list[int]) -> None:
    q, k, v, positions = packed_case(LENGTHS)
    hidden = torch.zeros(positions.numel(), dtype=torch.bool)
    hidden[hide] = True
    batch = PackedSequences.from_positions(positions, hidden)
    assert (batch.hidden is None) == (not hide)
    out = torch.empty_like(q)
    attend(q, k, v, batch, 0.5, out)
    expected = dense_attention(q, k, v, allowed(positions, hidden, causal=True), 0.5)
    torch.testing.assert_close(out.reshape(q.shape[0], -1).double(), expected, atol=1e-5, rtol=1e-5)
