"""Triton kernels on a real GPU vs the PyTorch fallbacks (skipped without CUDA + triton)."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from kernels_reference import ELEMENTWISE_WRAPPERS, lstm_case, lstm_inputs, ref_lstm, spy_calls
from vllm_factory.kernels import (
    _dispatch,
    bidirectional_lstm,
    build_rope_cache,
    fused_add_layernorm,
    fused_geglu,
    fused_layernorm,
    fused_rmsnorm,
    fused_rope,
)
from vllm_factory.kernels.layernorm import RMSOptions

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or importlib.util.find_spec("triton") is None,
    reason="needs a CUDA GPU and triton",
)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype == torch.float32:
        # GPU erf/exp/FMA differ from PyTorch's in the last bits only.
        torch.testing.assert_close(actual, expected, rtol=2e-5, atol=2e-5)
    else:
        # Both round one fp32 result; allow one ulp where the fp32 values straddle a tie.
        torch.testing.assert_close(actual.float(), expected.float(), rtol=1.6e-2, atol=1e-2)


@pytest.fixture
def triton_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return spy_calls(monkeypatch, ELEMENTWISE_WRAPPERS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("tokens", "heads", "head_dim"), [(1, 12, 64), (130, 12, 64), (2048, 3, 32)]
)
@pytest.mark.parametrize("base", [10000.0, 160000.0])
def test_rope(triton_calls, dtype, tokens: int, heads: int, head_dim: int, base: float) -> None:
    cos, sin = build_rope_cache(8192, head_dim, base, device="cuda")
    q = torch.randn(tokens, heads, head_dim, device="cuda").to(dtype)
    k = torch.randn(tokens, heads, head_dim, device="cuda").to(dtype)
    positions = torch.randint(0, 8192, (tokens,), device="cuda")
    out = fused_rope(q, k, positions, cos, sin)
    assert triton_calls == ["rope_triton"]
    ref = fused_rope(q, k, positions, cos, sin, backend="torch")
    _close(out[0], ref[0])
    _close(out[1], ref[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("tokens", "inter"), [(1, 1152), (130, 1152), (2048, 96), (7, 2624)])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_geglu(triton_calls, dtype, tokens: int, inter: int, approximate: str) -> None:
    x = (torch.randn(tokens, 2 * inter, device="cuda") * 3).to(dtype)
    out = fused_geglu(x, approximate)
    assert triton_calls == ["geglu_triton"]
    _close(out, fused_geglu(x, approximate, backend="torch"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("tokens", "hidden"), [(1, 768), (130, 96), (2048, 768), (7, 1024)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_layernorms(triton_calls, dtype, tokens: int, hidden: int, with_bias: bool) -> None:
    x = torch.randn(tokens, hidden, device="cuda").to(dtype)
    r = torch.randn(tokens, hidden, device="cuda").to(dtype)
    w = torch.rand(hidden, device="cuda") + 0.5
    b = torch.randn(hidden, device="cuda") if with_bias else None
    _close(fused_layernorm(x, w, b, 1e-5), fused_layernorm(x, w, b, 1e-5, backend="torch"))
    normed, summed = fused_add_layernorm(x, r, w, b, 1e-5)
    assert triton_calls == ["layernorm_triton", "layernorm_triton"]
    normed_ref, summed_ref = fused_add_layernorm(x, r, w, b, 1e-5, backend="torch")
    assert torch.equal(summed, summed_ref)  # one rounding of an exact fp32 sum: bit-identical
    _close(normed, normed_ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("tokens", "hidden"), [(1, 768), (2048, 64), (7, 1024)])
@pytest.mark.parametrize("rms", [RMSOptions(offset=1.0), RMSOptions(round_before_weight=True)])
def test_rmsnorm(triton_calls, dtype, tokens: int, hidden: int, rms: RMSOptions) -> None:
    x = torch.randn(tokens, hidden, device="cuda").to(dtype)
    w = (torch.rand(hidden, device="cuda") + 0.5).to(dtype)
    out = fused_rmsnorm(x, w, 1e-6, rms)
    assert triton_calls == ["layernorm_triton"]
    _close(out, fused_rmsnorm(x, w, 1e-6, rms, backend="torch"))


def test_disable_env_forces_fallback(triton_calls, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_dispatch.DISABLE_ENV, "1")
    x = torch.randn(4, 64, device="cuda")
    assert _dispatch.select_backend("auto", x) == "torch"
    fused_geglu(x)
    fused_layernorm(x, torch.ones(64, device="cuda"), None)
    assert triton_calls == []
    fused_geglu(x, backend="triton")  # an explicit request still wins
    assert triton_calls == ["geglu_triton"]


def test_autograd_inputs_use_fallback(triton_calls) -> None:
    x = torch.randn(4, 64, device="cuda", requires_grad=True)
    fused_geglu(x).sum().backward()
    assert triton_calls == [] and x.grad is not None
    with torch.no_grad():
        fused_geglu(x)
    assert triton_calls == ["geglu_triton"]


def test_mixed_devices_use_fallback() -> None:
    x = torch.randn(4, 64, device="cuda")
    assert _dispatch.select_backend("auto", x, torch.ones(64)) == "torch"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    ("lengths", "buckets", "max_rel", "head_dim"),
    [([5, 37, 70, 1, 16], 8, 32, 32), ([600, 3, 129, 256], 256, 512, 64), ([40, 9], -1, 16, 64)],
)
def test_deberta_attention(dtype, lengths, buckets: int, max_rel: int, head_dim: int) -> None:
    pytest.importorskip("transformers.models.deberta_v2")
    from deberta_reference import hf_case
    from vllm_factory.kernels import flash_deberta_attention

    case = hf_case(lengths, 4, head_dim, buckets, max_rel)
    out = flash_deberta_attention(*case.args(dtype, "cuda"))  # "auto" picks Triton on CUDA
    fallback = flash_deberta_attention(*case.args(dtype, "cuda"), backend="torch")
    if dtype == torch.float32:
        torch.testing.assert_close(out.cpu(), case.expected, rtol=2e-5, atol=2e-5)
        torch.testing.assert_close(out, fallback, rtol=2e-5, atol=2e-5)
    else:
        torch.testing.assert_close(out.float().cpu(), case.expected, rtol=5e-2, atol=5e-2)
        torch.testing.assert_close(out.float(), fallback.float(), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("half_window", [None, 64])
@pytest.mark.parametrize(("lengths", "head_dim"), [([5, 37, 70, 1, 16], 32), ([512] * 9, 64)])
def test_attention_by_rows(dtype, half_window, lengths: list[int], head_dim: int) -> None:
    """ModernBERT's in-graph attention: whole sequences and its local band."""
    from test_kernels_rows_attention import reference, rows_case
    from vllm_factory.kernels import attention_by_rows

    q, k, v, start, end = rows_case(lengths, half_window, heads=4, dim=head_dim)
    expected = reference(q, k, v, start, end, head_dim**-0.5).float()
    args = [t.to("cuda", dtype) for t in (q, k, v)] + [start.cuda(), end.cuda(), max(lengths)]
    out = attention_by_rows(*args)  # "auto" picks Triton on CUDA
    tol = 2e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(out.float().cpu(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("lengths", "head_dim"), [([5, 37, 70, 1, 16], 32), ([512] * 5, 64)])
def test_attention_by_rows_with_bias(dtype, lengths: list[int], head_dim: int) -> None:
    """mT5's in-graph attention: T5's bias by relative distance, unscaled scores."""
    from test_kernels_rows_attention import reference, rows_case, t5_bias_case
    from vllm_factory.kernels import attention_by_rows

    q, k, v, start, end = rows_case(lengths, None, heads=3, dim=head_dim)
    bias, index, bias_of = t5_bias_case()
    expected = reference(q * 0.2, k, v, start, end, 1.0, bias, bias_of).float()
    args = [t.to("cuda", dtype) for t in (q * 0.2, k, v)] + [start.cuda(), end.cuda()]
    out = attention_by_rows(
        *args, max(lengths), scale=1.0, bias=bias.cuda(), bias_index=index.cuda()
    )  # "auto" picks Triton on CUDA
    tol = 2e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(out.float().cpu(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("lengths", "hidden"), [([1], 256), ([384, 300, 17, 1] * 5, 256), ([40, 9], 96)]
)
@pytest.mark.parametrize("per_step", [False, True])
@torch.no_grad()
def test_bidirectional_lstm(
    dtype: torch.dtype, lengths: list[int], hidden: int, per_step: bool
) -> None:
    """The kernel (one launch, or one per time step) vs the fallback in the same dtype, and vs
    cuDNN's packed LSTM (fp32: IEEE)."""
    lstm, x, lens = lstm_case(sorted(lengths, reverse=True), 2 * hidden, hidden)
    lstm, x = lstm.cuda().to(dtype), x.cuda().to(dtype)
    gates, w_hh = lstm_inputs(lstm, x)
    out = bidirectional_lstm(gates, w_hh, lens.cuda(), backend="triton", per_step=per_step)
    _close(out, bidirectional_lstm(gates, w_hh, lens.cuda(), backend="torch"))
    if dtype == torch.float32:  # cuDNN in IEEE float32, not its default TF32
        before, torch.backends.cudnn.rnn.fp32_precision = (
            torch.backends.cudnn.rnn.fp32_precision,
            "ieee",
        )
        try:
            expected = ref_lstm(lstm, x, lens)
        finally:
            torch.backends.cudnn.rnn.fp32_precision = before
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


@torch.no_grad()
def test_bidirectional_lstm_per_step_replays_from_a_cuda_graph() -> None:
    """What the per-step kernel is for: its T launches captured once, replayed on new inputs
    written into the captured buffers (GLiNER's width: H = 384)."""
    lstm, x, lens = lstm_case([200, 150, 7], 768, 384)
    lstm, x = lstm.cuda().to(torch.bfloat16), x.cuda().to(torch.bfloat16)
    gates, w_hh = lstm_inputs(lstm, x)
    lens = lens.cuda()
    static = gates.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile outside the capture
        bidirectional_lstm(static, w_hh, lens, backend="triton", per_step=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = bidirectional_lstm(static, w_hh, lens, backend="triton", per_step=True)
    fresh = torch.randn_like(gates)
    static.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    expected = bidirectional_lstm(fresh, w_hh, lens, backend="triton", per_step=True)
    torch.testing.assert_close(captured, expected, rtol=0, atol=0)
