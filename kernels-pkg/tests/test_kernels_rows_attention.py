"""``attention_by_rows`` (each row's key range from the device) and its bounds: the PyTorch
fallback against a row-by-row float64 reference, whole sequences and two-sided windows."""

from __future__ import annotations

import pytest
import torch
from vllm_factory.kernels import attention_by_rows, sequence_bounds, visible_ends, window_bounds


def packed(lengths: list[int], heads: int = 3, dim: int = 16, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q, k, v = (torch.randn(total, heads, dim, generator=g) for _ in range(3))
    positions = torch.cat([torch.arange(n) for n in lengths])
    return q, k, v, positions


def rows_case(lengths: list[int], half_window: int | None, heads: int = 3, dim: int = 16):
    """q, k, v and each row's key range: its sequence, or the band of ``half_window``."""
    q, k, v, positions = packed(lengths, heads, dim)
    start, end = sequence_bounds(positions)
    if half_window is not None:
        start, end = window_bounds(start, end, half_window)
    return q, k, v, start, end


def reference(q, k, v, start, end, scale, bias=None, bias_of=None):
    """Row by row in float64: softmax over the keys start[i] <= j < end[i]; zeros if none.
    ``bias_of(i - j)``: the bucket whose ``bias[:, bucket]`` joins the scores (before scale)."""
    out = torch.zeros(q.shape, dtype=torch.float64)
    for i in range(q.shape[0]):
        lo, hi = int(start[i]), int(end[i])
        if hi <= lo:
            continue
        scores = torch.einsum("hd,khd->hk", q[i].double(), k[lo:hi].double())
        if bias is not None:
            buckets = [bias_of(i - j) for j in range(lo, hi)]
            scores = scores + bias.double()[:, buckets]
        scores = scores * scale
        out[i] = torch.einsum("hk,khd->hd", torch.softmax(scores, -1), v[lo:hi].double())
    return out


def t5_bias_case(heads: int = 3, buckets: int = 8, span: int = 9, seed: int = 1):
    """A per-head bias table and a T5-like distance -> bucket index (distances beyond
    ``span - 1`` share the edge buckets): ``bias``, ``bias_index``, ``bias_of``."""
    g = torch.Generator().manual_seed(seed)
    bias = torch.randn(heads, buckets, generator=g) * 2
    distance = torch.arange(-(span - 1), span)
    index = torch.where(distance > 0, distance.clamp(max=buckets // 2 - 1), buckets // 2)
    index = torch.where(distance < 0, buckets // 2 + (-distance).clamp(max=buckets // 2 - 1), index)
    index = torch.where(distance == 0, 0, index).to(torch.int32)

    def bias_of(d: int) -> int:
        return int(index[max(-(span - 1), min(span - 1, d)) + span - 1])

    return bias, index, bias_of


def test_window_bounds_keep_a_band_inside_each_sequence():
    start, end = sequence_bounds(torch.tensor([0, 1, 2, 3, 4, 5, 0, 1, 0]))
    w_start, w_end = window_bounds(start, end, 2)
    assert w_start.tolist() == [0, 0, 0, 1, 2, 3, 6, 6, 8]
    assert w_end.tolist() == [3, 4, 5, 6, 6, 6, 8, 8, 9]
    assert w_start.dtype == w_end.dtype == torch.int32


@pytest.mark.parametrize("half_window", [None, 0, 4, 64])
@pytest.mark.parametrize("lengths", [[5, 37, 70, 1, 16], [300, 3], [1, 1, 1]])
def test_fallback_matches_row_by_row_attention(lengths, half_window):
    q, k, v, start, end = rows_case(lengths, half_window)
    out = torch.full_like(q, float("nan"))
    given = attention_by_rows(q, k, v, start, end, max(lengths), out=out, backend="torch")
    assert given is out
    expected = reference(q, k, v, start, end, q.shape[-1] ** -0.5)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)


def biased_run(lengths: list[int], half_window: int | None, backend: str, scale: float = 0.7):
    """``attention_by_rows`` with a T5-like bias on ``backend`` (float64), its float64
    reference, and the reference without the bias."""
    q, k, v, start, end = rows_case(lengths, half_window)
    bias, index, bias_of = t5_bias_case()
    out = attention_by_rows(
        q, k, v, start, end, max(lengths), scale=scale, bias=bias, bias_index=index,
        backend=backend,
    )  # fmt: skip
    expected = reference(q, k, v, start, end, scale, bias, bias_of)
    return out.double(), expected, reference(q, k, v, start, end, scale)


@pytest.mark.parametrize("half_window", [None, 4])
@pytest.mark.parametrize("lengths", [[5, 37, 30, 1, 16], [3, 3]])
def test_fallback_adds_a_bias_by_distance(lengths, half_window):
    """T5's relative position bias: ``bias[h, bucket(i - j)]`` on every score, distances past
    the table's span clamped to its edge, before the scale (T5 scales by 1)."""
    out, expected, plain = biased_run(lengths, half_window, "torch")
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    assert (out - plain).abs().max() > 1e-2  # the bias mattered


def test_bias_needs_its_index_and_one_column_per_head():
    q, k, v, positions = packed([4])
    start, end = sequence_bounds(positions)
    bias, index, _ = t5_bias_case()
    with pytest.raises(ValueError, match="together"):
        attention_by_rows(q, k, v, start, end, 4, bias=bias)
    with pytest.raises(ValueError, match="H = 3"):
        attention_by_rows(q, k, v, start, end, 4, bias=bias[:2], bias_index=index)
    with pytest.raises(ValueError, match="2 \\* span - 1"):
        attention_by_rows(q, k, v, start, end, 4, bias=bias, bias_index=index[1:])


def test_a_row_without_keys_gets_zeros_and_scale_is_applied():
    q, k, v, _ = packed([6])
    start = torch.tensor([0, 0, 3, 3, 2, 5], dtype=torch.int32)
    end = torch.tensor([6, 2, 3, 6, 4, 6], dtype=torch.int32)  # row 2: no key
    out = attention_by_rows(q, k, v, start, end, 6, scale=0.3, backend="torch")
    expected = reference(q, k, v, start, end, 0.3)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)
    assert out[2].abs().max() == 0


def test_bad_shapes_are_refused():
    q, k, v, positions = packed([4])
    start, end = sequence_bounds(positions)
    with pytest.raises(ValueError, match="row_start"):
        attention_by_rows(q, k, v, start[:2], end, 4)
    with pytest.raises(ValueError, match="out"):
        attention_by_rows(q, k, v, start, end, 4, out=torch.empty(4, 3, 8))


def test_visible_ends_hide_each_sequences_trailing_run_of_one_token():
    # sequences: [5 9 7 7] (tail of two 7s), [7] (a first token is never hidden), [4 7 4]
    # (a 7 inside, none trailing), [7 7 7] (all but the first hidden), a padding token
    ids = torch.tensor([5, 9, 7, 7, 7, 4, 7, 4, 7, 7, 7, 7])
    positions = torch.tensor([0, 1, 2, 3, 0, 0, 1, 2, 0, 1, 2, 0])
    _, end = sequence_bounds(positions)
    visible = visible_ends(ids, positions, end, 7)
    assert visible.tolist() == [2, 2, 2, 2, 5, 8, 8, 8, 9, 9, 9, 12]
    assert visible.dtype == torch.int32


def test_in_graph_attention_is_chosen_by_switch_and_device(monkeypatch):
    """Where the encoder's switch wants it, and never off CUDA or without a usable Triton (its
    fallback reads the ranges on the host)."""
    from vllm_factory.kernels import in_graph_attention_chosen, rows_attention

    monkeypatch.setattr(rows_attention, "triton_available", lambda: True)
    monkeypatch.delenv("VLLM_FACTORY_DISABLE_TRITON", raising=False)
    assert in_graph_attention_chosen("cuda", True) and not in_graph_attention_chosen("cuda", False)
    assert not in_graph_attention_chosen("cpu", True) and not in_graph_attention_chosen(None, True)
    monkeypatch.setenv("VLLM_FACTORY_DISABLE_TRITON", "1")
    assert not in_graph_attention_chosen("cuda", True)
    monkeypatch.setattr(rows_attention, "triton_available", lambda: False)
    monkeypatch.delenv("VLLM_FACTORY_DISABLE_TRITON")
    assert not in_graph_attention_chosen("cuda", True)
