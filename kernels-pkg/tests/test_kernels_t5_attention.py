"""``vllm_factory::t5_attention`` (T5's biased attention, the mT5 encoder's split point)
against a dense reference, on exact-length and padded groups."""

from __future__ import annotations

import pytest
import torch
from packed_reference import allowed, dense_attention, packed_case
from vllm_factory.kernels import packed_step_cache
from vllm_factory.kernels.t5_attention import T5_ATTENTION_OP, SequenceGroups, t5_attention
from vllm_factory.kernels.t5_position_bias import position_bias, relative_position_bucket

# several beyond max_distance (16), equal lengths adjacent (40, 40) and apart (17, 17)
LENGTHS = [5, 40, 40, 17, 70, 1, 17, 23]
BUCKETS, MAX_DISTANCE = 8, 16


def dense_bias(table: torch.Tensor, positions: torch.Tensor, heads: slice) -> torch.Tensor:
    """``[H, T, T]`` T5 bias of every (query, key) pair of the packed batch."""
    relative = positions[None, :] - positions[:, None]
    return table[relative_position_bucket(relative, BUCKETS, MAX_DISTANCE)][..., heads].permute(
        2, 0, 1
    )


def test_op_writes_into_out_and_returns_nothing() -> None:
    name = T5_ATTENTION_OP.split("::")[1]
    schema = getattr(torch.ops.vllm_factory, name).default._schema
    assert T5_ATTENTION_OP == "vllm_factory::t5_attention"
    assert not schema.returns
    assert [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write] == ["out"]


@pytest.mark.parametrize("min_fill", [1.0, 0.3])  # exact-length groups; padded groups
@pytest.mark.parametrize("first_head", [0, 2])  # a tensor-parallel rank's heads
def test_op_matches_dense_reference(min_fill: float, first_head: int) -> None:
    q, k, v, positions = packed_case(LENGTHS, heads=2)
    table = torch.randn(BUCKETS, 4, generator=torch.Generator().manual_seed(1))
    out = torch.full_like(q, float("nan"))
    args = (positions, table, BUCKETS, MAX_DISTANCE, first_head, min_fill, out)
    assert t5_attention(q, k, v, *args) is None
    local = slice(first_head, first_head + 2)
    expected = dense_attention(
        q, k, v, allowed(positions), 1.0, dense_bias(table, positions, local)
    )
    torch.testing.assert_close(out.reshape(q.shape[0], -1).double(), expected, atol=1e-5, rtol=1e-5)


def test_layout_is_built_once_per_step() -> None:
    q, k, v, positions = packed_case(LENGTHS, heads=2)
    table = torch.randn(BUCKETS, 2)
    built: dict = {}

    def cache(key, positions, build):
        if key not in built:
            built[key] = build()
        return built[key]

    previous = packed_step_cache.cache_layouts_per_step(cache)
    try:
        for _ in range(3):  # three layers of one step
            t5_attention(q, k, v, positions, table, BUCKETS, MAX_DISTANCE, 0, None, q.clone())
    finally:
        packed_step_cache.cache_layouts_per_step(previous)
    assert len(built) == 1
    assert isinstance(next(iter(built.values())), SequenceGroups)


def test_bias_of_a_shorter_sequence_is_a_corner() -> None:
    table = torch.randn(BUCKETS, 3)
    full = position_bias(table, 30, BUCKETS, MAX_DISTANCE)
    torch.testing.assert_close(full[:, :11, :11], position_bias(table, 11, BUCKETS, MAX_DISTANCE))
