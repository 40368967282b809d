"""Triton kernels run through Triton's CPU interpreter, compared with the references.

Not collected by a plain ``pytest tests`` (the name does not match ``test_*.py``):
``test_kernels_triton_interpreter.py`` runs this file in a subprocess with ``TRITON_INTERPRET=1``.
Why a subprocess: with triton 3.9, ``triton.jit`` reads ``triton.knobs.runtime.interpret``
(the ``TRITON_INTERPRET`` env var) when a kernel is *decorated*, i.e. when our
``_triton_*`` modules are first imported, and picks ``InterpretedFunction`` or ``JITFunction``
once for the whole process. Setting the variable from inside a shared pytest process is
order-dependent and would leak into the CUDA tests, so it is set before Python starts.
"""

from __future__ import annotations

import os

import pytest
import torch
from kernels_reference import (
    ELEMENTWISE_WRAPPERS,
    close,
    lstm_case,
    lstm_inputs,
    ref_geglu,
    ref_layernorm,
    ref_lstm,
    ref_rope,
    spy_calls,
)

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("run with TRITON_INTERPRET=1 (see module docstring)", allow_module_level=True)

from triton.runtime.interpreter import InterpretedFunction
from vllm_factory.kernels import (
    _dispatch,
    _triton_deberta_attention,
    _triton_geglu,
    _triton_layernorm,
    _triton_lstm,
    _triton_rope,
    _triton_span_logits,
    bidirectional_lstm,
    build_rope_cache,
    flash_deberta_attention,
    fused_add_layernorm,
    fused_geglu,
    fused_layernorm,
    fused_rmsnorm,
    fused_rope,
    span_logits,
)
from vllm_factory.kernels.layernorm import RMSOptions


def test_kernels_are_interpreted() -> None:
    for kernel in (
        _triton_rope._rope_kernel,
        _triton_geglu._geglu_kernel,
        _triton_layernorm._layernorm_kernel,
        _triton_deberta_attention._deberta_attention_kernel,
        _triton_lstm._bilstm_kernel,
        _triton_lstm._bilstm_step_kernel,
        _triton_span_logits._span_logits_kernel,
    ):
        assert isinstance(kernel, InterpretedFunction), type(kernel)


def test_auto_still_uses_torch_on_cpu() -> None:
    # The interpreter is a test tool: "auto" must never route CPU work through it.
    assert _dispatch.select_backend("auto", torch.zeros(1)) == "torch"
    assert _dispatch.select_backend("triton", torch.zeros(1)) == "triton"


@pytest.fixture
def triton_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every call into the Triton wrappers, to prove the kernel path ran."""
    return spy_calls(
        monkeypatch,
        (
            *ELEMENTWISE_WRAPPERS,
            "_triton_deberta_attention.deberta_attention_triton",
            "_triton_deberta_attention.deberta_attention_rows_triton",
            "_triton_lstm.lstm_triton",
            "_triton_lstm.lstm_triton_steps",
            "_triton_span_logits.span_logits_triton",
        ),
    )


def _bf16_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    # The interpreter casts fp32 -> bf16 by truncation (GPUs round to nearest even), so the
    # two paths may differ by one bf16 ulp here; fp16 and fp32 casts agree exactly.
    torch.testing.assert_close(actual.float(), expected.float(), rtol=1.6e-2, atol=1e-2)


# --- RoPE -------------------------------------------------------------------------------------

ROPE_CASES = [
    (1, 4, 2, 32, 10000.0),
    (7, 12, 12, 64, 160000.0),
    (130, 3, 1, 32, 160000.0),
    (130, 12, 4, 64, 10000.0),
    (5, 2, 2, 96, 10000.0),
]


@pytest.mark.parametrize(("tokens", "hq", "hk", "head_dim", "base"), ROPE_CASES)
def test_rope(triton_calls, tokens: int, hq: int, hk: int, head_dim: int, base: float) -> None:
    g = torch.Generator().manual_seed(tokens + head_dim)
    q = torch.randn(tokens, hq, head_dim, generator=g)
    k = torch.randn(tokens, hk, head_dim, generator=g)
    positions = torch.randint(0, 300, (tokens,), generator=g)
    cos, sin = build_rope_cache(300, head_dim, base)
    q_out, k_out = fused_rope(q, k, positions, cos, sin, backend="triton")
    assert triton_calls == ["rope_triton"]
    q_ref, k_ref = ref_rope(q, k, positions, head_dim, base)
    close(q_out, q_ref)
    close(k_out, k_ref)
    q_fb, k_fb = fused_rope(q, k, positions, cos, sin, backend="torch")
    close(q_out, q_fb)
    close(k_out, k_fb)


def test_rope_strided_qkv_views(triton_calls) -> None:
    qkv = torch.randn(9, 3, 4, 32)
    q, k = qkv[:, 0], qkv[:, 1]  # token stride 3*4*32, head stride 32
    positions = torch.arange(9, dtype=torch.int32) * 5
    cos, sin = build_rope_cache(64, 32, 160000.0)
    q_out, k_out = fused_rope(q, k, positions, cos, sin, backend="triton")
    assert triton_calls == ["rope_triton"]
    q_ref, k_ref = ref_rope(q, k, positions, 32, 160000.0)
    close(q_out, q_ref)
    close(k_out, k_ref)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rope_half_precision(triton_calls, dtype: torch.dtype) -> None:
    q = torch.randn(7, 4, 64).to(dtype)
    k = torch.randn(7, 2, 64).to(dtype)
    positions = torch.arange(7) * 11
    cos, sin = build_rope_cache(128, 64, 10000.0)
    q_out, k_out = fused_rope(q, k, positions, cos, sin, backend="triton")
    q_fb, k_fb = fused_rope(q, k, positions, cos, sin, backend="torch")
    assert triton_calls == ["rope_triton"] and q_out.dtype == dtype
    _bf16_close(q_out, q_fb)
    _bf16_close(k_out, k_fb)


# --- GeGLU ------------------------------------------------------------------------------------

GEGLU_CASES = [(1, 1152), (7, 96), (7, 48), (130, 64), (130, 1152)]


@pytest.mark.parametrize(("tokens", "inter"), GEGLU_CASES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_geglu(triton_calls, tokens: int, inter: int, approximate: str) -> None:
    x = torch.randn(tokens, 2 * inter, generator=torch.Generator().manual_seed(inter)) * 3
    x[0, :4] = torch.tensor([-30.0, 30.0, 0.0, -1e-3])  # tanh/erf saturation and zero
    out = fused_geglu(x, approximate, backend="triton")
    assert triton_calls == ["geglu_triton"]
    assert out.shape == (tokens, inter)
    close(out, ref_geglu(x, approximate))
    close(out, fused_geglu(x, approximate, backend="torch"))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_geglu_half_precision_and_leading_dims(triton_calls, dtype: torch.dtype) -> None:
    x = torch.randn(2, 5, 192).to(dtype)
    out = fused_geglu(x, backend="triton")
    assert triton_calls == ["geglu_triton"] and out.shape == (2, 5, 96) and out.dtype == dtype
    _bf16_close(out, fused_geglu(x, backend="torch"))


# --- LayerNorm --------------------------------------------------------------------------------

NORM_CASES = [(1, 96, False), (7, 128, True), (130, 768, False), (130, 96, True)]


@pytest.mark.parametrize(("tokens", "hidden", "with_bias"), NORM_CASES)
def test_layernorm(triton_calls, tokens: int, hidden: int, with_bias: bool) -> None:
    g = torch.Generator().manual_seed(tokens + hidden)
    x = torch.randn(tokens, hidden, generator=g) * 2 + 0.5
    w = torch.randn(hidden, generator=g)
    b = torch.randn(hidden, generator=g) if with_bias else None
    out = fused_layernorm(x, w, b, 1e-5, backend="triton")
    assert triton_calls == ["layernorm_triton"]
    close(out, ref_layernorm(x, w, b, 1e-5))
    close(out, fused_layernorm(x, w, b, 1e-5, backend="torch"))


RMS_OPTIONS = [RMSOptions(), RMSOptions(offset=1.0), RMSOptions(round_before_weight=True)]


@pytest.mark.parametrize(("tokens", "hidden"), [(1, 96), (130, 64), (7, 768)])
@pytest.mark.parametrize("rms", RMS_OPTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rmsnorm(triton_calls, tokens: int, hidden: int, rms: RMSOptions, dtype) -> None:
    g = torch.Generator().manual_seed(tokens + hidden)
    x = (torch.randn(tokens, hidden, generator=g) * 2 + 0.5).to(dtype)
    w = torch.randn(hidden, generator=g).to(dtype)
    out = fused_rmsnorm(x, w, 1e-6, rms, backend="triton")
    assert triton_calls == ["layernorm_triton"] and out.dtype == dtype
    expected = fused_rmsnorm(x, w, 1e-6, rms, backend="torch")
    if dtype == torch.float32:
        close(out, expected)
    else:  # fp16: one rounding apart at most (1 / sqrt vs rsqrt)
        torch.testing.assert_close(out.float(), expected.float(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize(("tokens", "hidden", "with_bias"), NORM_CASES)
def test_add_layernorm(triton_calls, tokens: int, hidden: int, with_bias: bool) -> None:
    g = torch.Generator().manual_seed(tokens * hidden)
    x = torch.randn(tokens, hidden, generator=g)
    r = torch.randn(tokens, hidden, generator=g)
    w = torch.randn(hidden, generator=g)
    b = torch.randn(hidden, generator=g) if with_bias else None
    normed, summed = fused_add_layernorm(x, r, w, b, 1e-5, backend="triton")
    assert triton_calls == ["layernorm_triton"]
    assert torch.equal(summed, x + r)
    close(normed, ref_layernorm(x + r, w, b, 1e-5))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_add_layernorm_half_precision(triton_calls, dtype: torch.dtype) -> None:
    x = torch.randn(3, 7, 96).to(dtype)
    r = torch.randn(3, 7, 96).to(dtype)
    w = torch.rand(96) + 0.5  # fp32 weight, half-precision activations
    normed, summed = fused_add_layernorm(x, r, w, None, 1e-5, backend="triton")
    normed_fb, summed_fb = fused_add_layernorm(x, r, w, None, 1e-5, backend="torch")
    assert triton_calls == ["layernorm_triton"] and normed.dtype == dtype
    assert normed.shape == x.shape
    _bf16_close(summed, summed_fb)
    _bf16_close(normed, normed_fb)


# --- DeBERTa disentangled attention -----------------------------------------------------------

DEBERTA_CASES = [
    ([1], 8, 32),
    ([70], 8, 32),
    ([5, 37, 70, 1, 16], 8, 32),  # packed, lengths past the 8 buckets and past +-32
    ([300, 3], 256, 512),  # DeBERTa-v3 bucketing, a sequence longer than 256
    ([40, 9], -1, 16),  # no log buckets
]


@pytest.mark.parametrize(("lengths", "buckets", "max_rel"), DEBERTA_CASES)
def test_deberta_attention(triton_calls, lengths: list[int], buckets: int, max_rel: int) -> None:
    from deberta_reference import hf_case

    case = hf_case(lengths, position_buckets=buckets, max_relative_positions=max_rel)
    out = flash_deberta_attention(*case.args(), backend="triton")
    assert triton_calls == ["deberta_attention_triton"]
    close(out, case.expected)
    close(out, flash_deberta_attention(*case.args(), backend="torch"))


@pytest.mark.parametrize(
    ("pos_att_type", "share_att_key", "relative_attention", "head_dim"),
    [("c2p", True, True, 64), ("p2c", False, True, 32), ("c2p|p2c", True, False, 32)],
)
def test_deberta_attention_variants(
    triton_calls, pos_att_type: str, share_att_key: bool, relative_attention: bool, head_dim: int
) -> None:
    from deberta_reference import hf_case

    case = hf_case(
        [9, 30, 21], heads=3, head_dim=head_dim, pos_att_type=pos_att_type,
        share_att_key=share_att_key, relative_attention=relative_attention,
    )  # fmt: skip
    out = flash_deberta_attention(*case.args(), backend="triton")
    assert triton_calls == ["deberta_attention_triton"]
    close(out, case.expected)


def test_deberta_attention_precomputed_scores_into_out(triton_calls) -> None:
    from deberta_reference import hf_case
    from vllm_factory.kernels import relative_scores

    case = hf_case([5, 37, 70], position_buckets=8, max_relative_positions=32)
    q, k, v, cu, length, pos_key, pos_query, *rest = case.args()
    c2p, p2c = relative_scores(q, pos_key), relative_scores(k, pos_query)
    out = torch.full_like(q, float("nan"))
    given = flash_deberta_attention(
        q, k, v, cu, length, None, None, *rest, c2p=c2p, p2c=p2c, out=out, backend="triton"
    )
    assert triton_calls == ["deberta_attention_triton"] and given is out
    close(out, case.expected)
    close(out, flash_deberta_attention(*case.args(), backend="torch"))


@pytest.mark.parametrize(
    ("lengths", "buckets", "max_rel"),
    [([5, 37, 70, 1, 16], 8, 32), ([300, 3], 256, 512), ([40, 9, 1, 1, 1], -1, 16)],
)  # tiles straddling sequences; one-token runs as vLLM's graph padding makes
def test_attention_by_rows_with_deberta_terms(triton_calls, lengths, buckets, max_rel) -> None:
    from deberta_reference import hf_case
    from test_kernels_deberta_attention import rows_args
    from vllm_factory.kernels import attention_by_rows

    case = hf_case(lengths, position_buckets=buckets, max_relative_positions=max_rel)
    args, kwargs = rows_args(case, max(lengths) + 5)
    out = torch.full_like(case.q, float("nan"))
    given = attention_by_rows(*args, **kwargs, out=out, backend="triton")
    assert triton_calls == ["deberta_attention_rows_triton"] and given is out
    close(out, case.expected)


@pytest.mark.parametrize("half_window", [None, 3, 40])
@pytest.mark.parametrize("lengths", [[5, 37, 70, 1, 16], [1, 1, 1, 90]])
def test_attention_by_rows(triton_calls, lengths, half_window) -> None:
    """Plain attention through the rows kernel, whole sequences and two-sided windows (tiles
    straddling sequences, one-token runs as vLLM's graph padding makes)."""
    from test_kernels_rows_attention import reference, rows_case
    from vllm_factory.kernels import attention_by_rows

    q, k, v, start, end = rows_case(lengths, half_window)
    out = torch.full_like(q, float("nan"))
    given = attention_by_rows(q, k, v, start, end, max(lengths), out=out, backend="triton")
    assert triton_calls == ["deberta_attention_rows_triton"] and given is out
    expected = reference(q, k, v, start, end, q.shape[-1] ** -0.5)
    torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-5)
    fp16 = attention_by_rows(
        q.half(), k.half(), v.half(), start, end, max(lengths), backend="triton"
    )
    torch.testing.assert_close(fp16.double(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("lengths", [[5, 37, 70, 1, 16], [1, 1, 1, 90]])
def test_attention_by_rows_with_bias(triton_calls, lengths) -> None:
    """T5's relative position bias through the rows kernel (distances past the table's span
    clamped to its edge, the scale after the bias)."""
    from test_kernels_rows_attention import biased_run

    out, expected, _ = biased_run(lengths, None, "triton")
    assert triton_calls == ["deberta_attention_rows_triton"]
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("form", ["plain", "band", "t5"])
def test_rows_benchmark_measures(triton_calls, monkeypatch, form) -> None:
    """``benchmarks/bench_rows_attention.py``'s measurement on a tiny batch (fp16: see below):
    the kernel and every swept tile agree with SDPA in fp32, and the tiles are put back."""
    import pathlib
    import sys

    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    sys.modules.pop("bench_rows_attention", None)
    import bench_rows_attention as bench

    monkeypatch.setattr(bench, "SWEEP", [(16, 16, 4, 2), (32, 16, 2, 3)])
    tiles = _triton_deberta_attention._block_sizes
    row = bench.measure(
        form, 2, 80, device="cpu", dtype=torch.float16, timing=(0, 1, 1), sweep=True,
        timer=lambda fn, *_: 1.0,  # no timing on the CPU (and no compile of the fallback)
    )  # fmt: skip
    assert row["ok"] and row["rows_vs_fp32_max_abs"] < 1e-2, row
    assert [t["max_abs"] < 1e-2 for t in row["tile_sweep"].values()] == [True, True], row
    assert _triton_deberta_attention._block_sizes is tiles
    assert _triton_deberta_attention.NUM_STAGES == 2
    assert set(triton_calls) == {"deberta_attention_rows_triton"}


# fp16 only: triton 3.9's interpreter computes tl.dot on bf16 operands wrongly (garbage of
# order 1e10 on a plain 16x16 product), a bug of the interpreter; bf16 runs in the CUDA tests.
@pytest.mark.parametrize("dtype", [torch.float16])
def test_deberta_attention_half_precision(triton_calls, dtype: torch.dtype) -> None:
    from deberta_reference import hf_case

    case = hf_case([17, 40], position_buckets=8, max_relative_positions=32)
    out = flash_deberta_attention(*case.args(dtype), backend="triton")
    fallback = flash_deberta_attention(*case.args(dtype), backend="torch")
    assert triton_calls == ["deberta_attention_triton"] and out.dtype == dtype
    torch.testing.assert_close(out.float(), fallback.float(), rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(out.float(), case.expected, rtol=5e-2, atol=5e-2)


# --- bidirectional LSTM -------------------------------------------------------------------------

# float32 weights with H > 32 take the K_CHUNK path (32 columns of h at a time): 64 (two
# chunks), 48 (a masked second chunk), 96 (three chunks, BLOCK_K 128).
LSTM_CASES = [
    ([1], 32, 32), ([9, 7, 7, 3, 1], 48, 32), ([5, 5], 40, 24), ([3, 17, 2], 64, 64),
    ([4, 2], 40, 48), ([3, 1], 32, 96),
]  # fmt: skip


@pytest.mark.parametrize(("lengths", "width", "hidden"), LSTM_CASES)
@torch.no_grad()
def test_lstm(triton_calls, lengths: list[int], width: int, hidden: int) -> None:
    """More sequences than one block of 16 rows runs in a second program."""
    lengths = lengths * (7 if len(lengths) == 3 else 1)
    lstm, x, lens = lstm_case(lengths, width, hidden, seed=hidden)
    gates, w_hh = lstm_inputs(lstm, x)
    out = bidirectional_lstm(gates, w_hh, lens, backend="triton")
    assert triton_calls == ["lstm_triton"]
    order = torch.argsort(lens, descending=True, stable=True)  # packing wants longest first
    expected = torch.empty_like(out)
    expected[order] = ref_lstm(lstm, x[order], lens[order])
    close(out, expected)
    close(out, bidirectional_lstm(gates, w_hh, lens, backend="torch"))


@pytest.mark.parametrize(("lengths", "width", "hidden"), LSTM_CASES)
@torch.no_grad()
def test_lstm_per_step(triton_calls, lengths: list[int], width: int, hidden: int) -> None:
    """One launch per time step: units spread over programs (16 a program: H = 24 / 40 / 48
    leave a masked last block), more than one block of sequences, ragged lengths."""
    lengths = lengths * (7 if len(lengths) == 3 else 1)
    lstm, x, lens = lstm_case(lengths, width, hidden, seed=hidden)
    gates, w_hh = lstm_inputs(lstm, x)
    out = bidirectional_lstm(gates, w_hh, lens, backend="triton", per_step=True)
    assert triton_calls == ["lstm_triton_steps"]
    order = torch.argsort(lens, descending=True, stable=True)
    expected = torch.empty_like(out)
    expected[order] = ref_lstm(lstm, x[order], lens[order])
    close(out, expected)
    close(out, bidirectional_lstm(gates, w_hh, lens, backend="torch"))


@pytest.mark.parametrize(
    ("block_h", "k_chunk", "hidden"), [(32, 64, 40), (16, 128, 160), (32, 128, 160), (16, 16, 40)]
)
@torch.no_grad()
def test_lstm_per_step_tiles(block_h: int, k_chunk: int, hidden: int) -> None:
    """The tiles bench_bilstm.py sweeps give the same layer (H = 40 and 160: ragged unit
    blocks; 160 with 128 columns a chunk: a ragged last chunk of h and W_hh)."""
    lstm, x, lens = lstm_case([9, 7, 3], 48, hidden, seed=3)
    gates, w_hh = lstm_inputs(lstm, x)
    out = _triton_lstm.lstm_triton_steps(gates, w_hh, lens, block_h=block_h, k_chunk=k_chunk)
    close(out, bidirectional_lstm(gates, w_hh, lens, backend="torch"))


@pytest.mark.parametrize("hidden", [32, 160])  # 160: two chunks of the 16-bit default 128
@torch.no_grad()
def test_lstm_per_step_half_precision(triton_calls, hidden: int) -> None:
    lstm, x, lens = lstm_case([6, 4, 1], 32, hidden)
    gates, w_hh = lstm_inputs(lstm, x.half())
    out = bidirectional_lstm(gates, w_hh, lens, backend="triton", per_step=True)
    assert triton_calls == ["lstm_triton_steps"] and out.dtype == torch.float16
    _bf16_close(out, bidirectional_lstm(gates, w_hh, lens, backend="torch"))


@torch.no_grad()
def test_lstm_half_precision(triton_calls) -> None:
    """float16 here: triton 3.9's interpreter gets ``tl.dot`` of bfloat16 operands wrong (off by
    ~1 after one step, where float16 matches the fallback exactly); bfloat16 is checked on a GPU
    (``test_kernels_cuda.py``)."""
    lstm, x, lens = lstm_case([6, 4, 1], 32, 32)
    gates, w_hh = lstm_inputs(lstm, x.half())
    out = bidirectional_lstm(gates, w_hh, lens, backend="triton")
    assert triton_calls == ["lstm_triton"] and out.dtype == torch.float16
    _bf16_close(out, bidirectional_lstm(gates, w_hh, lens, backend="torch"))


# --- GLiNER span logits -----------------------------------------------------------------------

# (spans, table rows, inner, labels, with bias, rows dtype): ragged tiles on every axis, more
# labels than one label tile (70 > 64), the served width (inner 2048), int32 rows
SPAN_CASES = [
    (1, 3, 64, 5, True, torch.int64),
    (150, 40, 192, 5, True, torch.int64),
    (70, 9, 130, 37, False, torch.int64),
    (33, 12, 96, 70, True, torch.int32),
    (64, 20, 2048, 16, True, torch.int64),
]


def _span_inputs(spans, table_rows, inner, labels, with_bias, rows_dtype, dtype=torch.float32):
    g = torch.Generator().manual_seed(spans + inner + labels)
    table = torch.randn(table_rows, inner, generator=g).to(dtype)
    rows = torch.randint(0, table_rows, (spans, 2), generator=g).to(rows_dtype)
    weight = (torch.randn(labels, inner, generator=g) / inner**0.5).to(dtype)
    bias = torch.randn(labels, generator=g).to(dtype) if with_bias else None
    return table, rows, weight, bias


def _ref_span_logits(table, rows, weight, bias):
    hidden = (table[rows[:, 0].long()].double() + table[rows[:, 1].long()].double()).clamp_min(0)
    out = hidden @ weight.double().T
    return out if bias is None else out + bias.double()


@pytest.mark.parametrize("case", SPAN_CASES)
def test_span_logits(triton_calls, case) -> None:
    table, rows, weight, bias = _span_inputs(*case)
    out = span_logits(table, rows, weight, bias, backend="triton")
    assert triton_calls == ["span_logits_triton"]
    assert out.shape == (rows.shape[0], weight.shape[0]) and out.dtype == torch.float32
    expected = _ref_span_logits(table, rows, weight, bias).float()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, span_logits(table, rows, weight, bias, backend="torch"))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_span_logits_half_precision(triton_calls, dtype: torch.dtype) -> None:
    table, rows, weight, bias = _span_inputs(100, 30, 256, 5, True, torch.int64, dtype)
    out = span_logits(table, rows, weight, bias, backend="triton")
    assert triton_calls == ["span_logits_triton"] and out.dtype == dtype
    # the hidden layer is rounded to the dtype on both paths (the interpreter truncates)
    torch.testing.assert_close(
        out.float(), span_logits(table, rows, weight, bias, backend="torch").float(),
        rtol=2e-2, atol=3e-2,
    )  # fmt: skip


def test_span_logits_without_spans(triton_calls) -> None:
    table, rows, weight, bias = _span_inputs(1, 4, 64, 5, True, torch.int64)
    out = span_logits(table, rows[:0], weight, bias, backend="triton")
    assert out.shape == (0, 5)
