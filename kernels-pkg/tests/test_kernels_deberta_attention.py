"""DeBERTa attention fallback vs Hugging Face's DebertaV2 attention (fp32, CPU)."""

from __future__ import annotations

import pytest
import torch
from kernels_reference import close
from vllm_factory.kernels import (
    attention_by_rows,
    flash_deberta_attention,
    relative_position_index,
    relative_scores,
)

pytest.importorskip("transformers.models.deberta_v2")

from deberta_reference import hf_case  # its hf_case imports transformers lazily

# (lengths, position_buckets, max_relative_positions): lengths beyond the buckets and beyond
# max_relative_positions (log buckets, then clamping), packed batches of uneven lengths.
LENGTHS = [
    ([1], 8, 32),
    ([7], 8, 32),
    ([70], 8, 32),
    ([5, 37, 70, 1, 16], 8, 32),
    ([300, 3, 129], 256, 512),  # DeBERTa-v3's bucketing, one sequence > 256 tokens
    ([40, 9], -1, 16),  # no log buckets: plain relative distances clamped to +-16
]


@pytest.mark.parametrize(("lengths", "buckets", "max_rel"), LENGTHS)
def test_fallback_matches_hf(lengths: list[int], buckets: int, max_rel: int) -> None:
    case = hf_case(lengths, position_buckets=buckets, max_relative_positions=max_rel)
    out = flash_deberta_attention(*case.args(), backend="torch")
    close(out, case.expected)


@pytest.mark.parametrize("budget", [1, 80, 10**9])  # one group per sequence, some, one
def test_fallback_length_groups_match_hf(budget: int, monkeypatch) -> None:
    monkeypatch.setattr("vllm_factory.kernels.deberta_attention.PADDED_TOKENS_PER_GROUP", budget)
    case = hf_case([5, 37, 70, 1, 16, 37], position_buckets=8, max_relative_positions=32)
    close(flash_deberta_attention(*case.args(), backend="torch"), case.expected)


def test_length_groups_bound_padding() -> None:
    from vllm_factory.kernels.deberta_attention import _length_groups

    lengths = [128, 6, 32, 128, 20, 7, 127, 9]
    groups = _length_groups(lengths, 256)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for group in groups:
        longest = max(lengths[i] for i in group)
        assert len(group) == 1 or len(group) * longest <= 256
    assert groups[0] == [0, 3] and _length_groups([300], 16) == [[0]]


@pytest.mark.parametrize(
    ("pos_att_type", "share_att_key", "relative_attention"),
    [
        ("c2p", True, True),
        ("p2c", True, True),
        ("c2p|p2c", False, True),
        ("p2c|c2p", True, False),
    ],
)
@pytest.mark.parametrize("head_dim", [32, 64])
def test_fallback_variants_match_hf(
    pos_att_type: str, share_att_key: bool, relative_attention: bool, head_dim: int
) -> None:
    variant = {"pos_att_type": pos_att_type, "share_att_key": share_att_key}
    variant["relative_attention"] = relative_attention
    case = hf_case([9, 30, 21], heads=3, head_dim=head_dim, seed=head_dim, **variant)
    close(flash_deberta_attention(*case.args(), backend="torch"), case.expected)


def test_relative_index_matches_hf_buckets() -> None:
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    for buckets, max_rel, length in ((256, 512, 1500), (8, 32, 100), (-1, 16, 40)):
        span = buckets if buckets > 0 else max_rel
        x = torch.zeros(1, length, 4)
        hf_rel = build_relative_position(x, x, bucket_size=buckets, max_position=max_rel)[0]
        expected = torch.clamp(hf_rel + span, 0, 2 * span - 1)
        table = relative_position_index(length, span, buckets, max_rel)
        pos = torch.arange(length)
        assert torch.equal(table.long()[pos[:, None] - pos[None, :] + length - 1], expected)
        # p2c reads HF's clamp(-rel(j, i) + span): the same table, transposed.
        assert torch.equal(torch.clamp(-hf_rel.t() + span, 0, 2 * span - 1), expected)


def test_shared_rel_index_and_bf16() -> None:
    case = hf_case([12, 33], position_buckets=8, max_relative_positions=32)
    table = relative_position_index(200, 8, 8, 32)  # built once for a longer batch
    args = case.args(torch.bfloat16)
    out = flash_deberta_attention(*args, rel_index=table, backend="torch")
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), case.expected, rtol=5e-2, atol=5e-2)


def test_rejects_bad_args() -> None:
    q = torch.randn(5, 2, 32)
    cu = torch.tensor([0, 5], dtype=torch.int32)
    with pytest.raises(ValueError):
        flash_deberta_attention(q, q, q[:, :1], cu, 5)
    with pytest.raises(ValueError):
        flash_deberta_attention(q, q, q, cu, 5, pos_key=torch.randn(7, 2, 32))
    with pytest.raises(ValueError):
        flash_deberta_attention(q, q, q, cu.float(), 5)


def precomputed(args: tuple) -> tuple[tuple, dict]:
    """The same call with c2p / p2c computed beforehand (as a compiled encoder does)."""
    q, k, v, cu, length, pos_key, pos_query, *rest = args
    scores = {
        "c2p": None if pos_key is None else relative_scores(q, pos_key),
        "p2c": None if pos_query is None else relative_scores(k, pos_query),
    }
    return (q, k, v, cu, length, None, None, *rest), scores


@pytest.mark.parametrize("pos_att_type", ["c2p|p2c", "c2p", "p2c"])
def test_precomputed_scores_and_out(pos_att_type: str) -> None:
    case = hf_case([5, 37, 70], pos_att_type=pos_att_type)
    args, scores = precomputed(case.args())
    direct = flash_deberta_attention(*case.args(), backend="torch")
    out = torch.full_like(direct, float("nan"))
    given = flash_deberta_attention(*args, **scores, out=out, backend="torch")
    assert given is out
    assert torch.equal(out, direct)
    close(out, case.expected)


def test_rejects_bad_scores() -> None:
    case = hf_case([6, 3])
    args, scores = precomputed(case.args())
    with pytest.raises(ValueError, match="not both"):
        flash_deberta_attention(*case.args(), c2p=scores["c2p"])
    with pytest.raises(ValueError, match="c2p"):
        flash_deberta_attention(*args, c2p=scores["c2p"][:, :4])
    with pytest.raises(ValueError, match="same span"):
        flash_deberta_attention(*args, c2p=scores["c2p"], p2c=scores["p2c"][..., :4])
    with pytest.raises(ValueError, match="out"):
        flash_deberta_attention(*args, **scores, out=torch.empty(9, 2, 32, dtype=torch.float64))


def rows_args(case, max_len: int, dtype=torch.float32, device: str = "cpu") -> tuple[tuple, dict]:
    """The case as :func:`attention_by_rows` takes DeBERTa's attention: per-row bounds from
    positions, the c2p / p2c scores precomputed, one bucket table for ``max_len``, the scale
    counting the relative terms."""
    from vllm_factory.kernels import sequence_bounds

    q, k, v, cu, _length, pos_key, pos_query, buckets, max_rel, factor = case.args(dtype, device)
    lengths = (cu[1:] - cu[:-1]).tolist()
    positions = torch.cat([torch.arange(n) for n in lengths]).to(device)
    start, end = sequence_bounds(positions)
    span = pos_key.shape[0] // 2
    table = relative_position_index(max_len, span, buckets, max_rel, device)
    kwargs = {
        "bias_index": table,
        "c2p": relative_scores(q, pos_key),
        "p2c": relative_scores(k, pos_query),
        "scale": (q.shape[-1] * factor) ** -0.5,
    }
    return (q, k, v, start, end, max_len), kwargs


def test_sequence_bounds_from_positions_alone():
    from vllm_factory.kernels import sequence_bounds

    # stale rows (3, 4) before the first start, sequences of 3 and 5 tokens, two padding tokens
    positions = torch.tensor([3, 4, 0, 1, 2, 0, 1, 2, 3, 4, 0, 0])
    start, end = sequence_bounds(positions)
    assert start.tolist() == [0, 0, 2, 2, 2, 5, 5, 5, 5, 5, 10, 11]
    assert end.tolist() == [2, 2, 5, 5, 5, 10, 10, 10, 10, 10, 11, 12]
    assert start.dtype == end.dtype == torch.int32


@pytest.mark.parametrize(("lengths", "buckets", "max_rel"), LENGTHS)
def test_attention_by_rows_fallback_matches_hf(lengths, buckets, max_rel):
    case = hf_case(lengths, position_buckets=buckets, max_relative_positions=max_rel)
    args, kwargs = rows_args(case, max(lengths) + 7)
    out = torch.full_like(case.q, float("nan"))
    assert attention_by_rows(*args, **kwargs, out=out, backend="torch") is out
    close(out, case.expected)


def test_attention_by_rows_announces_itself(monkeypatch, caplog):
    """A server's log (and the GPU check's "kernels run") tells the in-graph attention from
    the split-point one by this name."""
    from vllm_factory.kernels import _dispatch

    monkeypatch.setattr(_dispatch, "_ANNOUNCED", set())
    case = hf_case([9, 4])
    args, kwargs = rows_args(case, 9)
    with caplog.at_level("INFO", logger=_dispatch.logger.name):
        attention_by_rows(*args, **kwargs, backend="torch")
    assert "vllm-factory kernel attention_by_rows runs on" in caplog.text


def test_attention_by_rows_rejects_a_short_table():
    case = hf_case([9, 4])
    args, kwargs = rows_args(case, 9)
    with pytest.raises(ValueError, match="bias_index"):
        attention_by_rows(*args[:5], 20, **kwargs)


def test_relative_index_ignores_the_default_dtype():
    """vLLM builds a model under its dtype as torch's default; the bucket table must still
    come from float32 arithmetic (in bf16, 146 of DeBERTa-v3's 1023 entries were wrong, seen
    first as bf16 scores 0.19 off gliner's on an H200)."""
    expected = relative_position_index(512, 256, 256, 512)
    before = torch.get_default_dtype()
    try:
        for dtype in (torch.bfloat16, torch.float16):
            torch.set_default_dtype(dtype)
            assert torch.equal(relative_position_index(512, 256, 256, 512), expected)
    finally:
        torch.set_default_dtype(before)


# What compiled graphs and vLLM's splitting-ops lists see of the DeBERTa encoder's ops (and of
# the row-range attention op the other in-graph encoders share).
OP_SCHEMAS = {
    "deberta_attention": "(Tensor q, Tensor k, Tensor v, Tensor positions, Tensor? c2p, "
    "Tensor? p2c, SymInt scale_factor, SymInt span, SymInt buckets, SymInt max_rel, "
    "Tensor(a10!) out) -> ()",
    "deberta_attention_rows": "(Tensor q, Tensor k, Tensor v, Tensor row_start, Tensor row_end, "
    "Tensor? rel_index, Tensor? c2p, Tensor? p2c, SymInt scale_factor, SymInt max_seqlen, "
    "Tensor(a10!) out) -> ()",
    "deberta_conv": "(Tensor x, Tensor positions, Tensor weight, Tensor? bias, SymInt groups, "
    "Tensor(a5!) out) -> ()",
    "attention_by_rows": "(Tensor q, Tensor k, Tensor v, Tensor row_start, Tensor row_end, "
    "SymInt max_seqlen, float scale, Tensor? bias, Tensor? bias_index, Tensor(a9!) out) -> ()",
}


@pytest.mark.parametrize("name", list(OP_SCHEMAS))
def test_ops_write_into_the_callers_buffer(name: str) -> None:
    """Under piecewise CUDA graphs the graph piece after a split point reads the addresses it
    saw at capture, so each op writes into the buffer the piece before it allocated and
    returns nothing (a returned tensor gave LFM2 vectors at cosine 0.13 on an H200)."""
    import vllm_factory.kernels.deberta_ops  # noqa: F401  registers the ops

    schema = getattr(torch.ops.vllm_factory, name).default._schema
    assert str(schema) == f"vllm_factory::{name}{OP_SCHEMAS[name]}"
    assert [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write] == ["out"]


def test_ops_leave_no_row_of_the_buffer_unwritten() -> None:
    """The graph allocates ``out`` with ``torch.empty``: whatever it held (NaN here) must not
    survive in rows no sequence owns (stale positions before the first start), nor in a batch
    with no sequence start at all."""
    import vllm_factory.kernels.deberta_ops  # noqa: F401  registers the ops

    torch.manual_seed(0)
    positions = torch.cat([torch.arange(4, 7), torch.arange(5), torch.zeros(2, dtype=torch.long)])
    q, k, v = (torch.randn(10, 2, 32) for _ in range(3))
    scores = torch.randn(2, 10, 16)  # [H, T, 2 * span] relative scores
    for rows in (positions, torch.arange(3, 13)):
        out = torch.full_like(q, float("nan"))
        torch.ops.vllm_factory.deberta_attention(q, k, v, rows, scores, scores, 3, 8, 8, 32, out)
        assert torch.isfinite(out).all()
        x = torch.randn(10, 8)
        conv_out = torch.full_like(x, float("nan"))
        weight = torch.randn(8, 8, 3)
        torch.ops.vllm_factory.deberta_conv(x, rows, weight, None, 1, conv_out)
        assert torch.isfinite(conv_out).all()
    assert (out == 0).all()  # no sequence at all: every row zero


def test_attention_by_rows_with_the_table_but_no_relative_terms_is_plain_attention():
    """DeBERTa with relative attention on but neither c2p nor p2c in ``pos_att_type`` passes
    its table alone: the attention is plain, scaled as given."""
    case = hf_case([9, 4])
    (q, k, v, start, end, max_len), kwargs = rows_args(case, 9)
    plain = attention_by_rows(q, k, v, start, end, max_len, scale=0.2, backend="torch")
    with_table = attention_by_rows(
        q, k, v, start, end, max_len, scale=0.2, bias_index=kwargs["bias_index"], backend="torch"
    )
    torch.testing.assert_close(with_table, plain)
