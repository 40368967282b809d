"""RMSNorm fallback vs transformers' own Gemma3 and LFM2 norms (CPU), and the module."""

from __future__ import annotations

import pytest
import torch
from vllm_factory.kernels import RMSNorm, RMSOptions, fused_rmsnorm

GEMMA = RMSOptions(offset=1.0)
LFM2 = RMSOptions(round_before_weight=True)


def _hf_norm(module: str, cls: str, size: int, eps: float) -> torch.nn.Module:
    modeling = pytest.importorskip(f"transformers.models.{module}")
    return getattr(modeling, cls)(size, eps=eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    ("module", "cls", "rms"),
    [
        ("gemma3.modeling_gemma3", "Gemma3RMSNorm", GEMMA),
        ("lfm2.modeling_lfm2", "Lfm2RMSNorm", LFM2),
    ],
)
def test_fallback_is_transformers_norm_to_the_bit(module, cls, rms, dtype) -> None:
    hf = _hf_norm(module, cls, 96, 1e-6).to(dtype)
    ours = RMSNorm(96, 1e-6, rms).to(dtype)
    torch.manual_seed(0)
    with torch.no_grad():
        hf.weight.uniform_(-0.5, 1.5)
        ours.weight.copy_(hf.weight)
        x = (torch.randn(5, 3, 96) * 3).to(dtype)
        assert torch.equal(ours(x), hf(x))


def test_module_initialises_to_unit_scale() -> None:
    x = torch.randn(4, 32)
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    for rms in (RMSOptions(), GEMMA, LFM2):
        torch.testing.assert_close(RMSNorm(32, 1e-6, rms)(x), expected)


def test_offset_with_rounding_and_fp32_weight() -> None:
    x = torch.randn(3, 16).bfloat16()
    w = torch.randn(16)  # fp32 weight beside bf16 activations
    normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)
    expected = ((w + 0.5) * normed.bfloat16().float()).bfloat16()
    out = fused_rmsnorm(x, w, 1e-5, RMSOptions(offset=0.5, round_before_weight=True))
    assert torch.equal(out, expected)


def test_rejects_bad_args() -> None:
    with pytest.raises(ValueError):
        fused_rmsnorm(torch.randn(3, 8), torch.ones(7))
    with pytest.raises(ValueError):
        fused_rmsnorm(torch.arange(8), torch.ones(8))
