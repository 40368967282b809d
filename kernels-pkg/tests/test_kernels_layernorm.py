"""LayerNorm fallbacks vs a naive reference and vs nn.LayerNorm(bias=False) (fp32, CPU)."""

from __future__ import annotations

import pytest
import torch
from kernels_reference import close, ref_layernorm
from vllm_factory.kernels import fused_add_layernorm, fused_layernorm


@pytest.mark.parametrize("tokens", [1, 7, 130])
@pytest.mark.parametrize("hidden", [96, 128, 768])
@pytest.mark.parametrize("with_bias", [False, True])
def test_fallback_matches_reference(tokens: int, hidden: int, with_bias: bool):
    g = torch.Generator().manual_seed(tokens + hidden)
    x = torch.randn(tokens, hidden, generator=g) * 2 + 0.5
    w = torch.randn(hidden, generator=g)
    b = torch.randn(hidden, generator=g) if with_bias else None
    close(fused_layernorm(x, w, b, 1e-5, backend="torch"), ref_layernorm(x, w, b, 1e-5))

    r = torch.randn(tokens, hidden, generator=g)
    normed, summed = fused_add_layernorm(x, r, w, b, 1e-5, backend="torch")
    assert torch.equal(summed, x + r)
    close(normed, ref_layernorm(x + r, w, b, 1e-5))


@pytest.mark.parametrize("hidden", [96, 768])
def test_matches_nn_layernorm_without_bias(hidden: int):
    torch.manual_seed(hidden)
    norm = torch.nn.LayerNorm(hidden, eps=1e-5, bias=False)
    with torch.no_grad():
        norm.weight.normal_()
        x = torch.randn(130, hidden)
        r = torch.randn(130, hidden)
        close(fused_layernorm(x, norm.weight, None, norm.eps), norm(x))
        normed, summed = fused_add_layernorm(x, r, norm.weight, None, norm.eps)
        close(normed, norm(x + r))
        close(summed, x + r)


def test_matches_hf_modernbert_layer_norms():
    modeling = pytest.importorskip("transformers.models.modernbert.modeling_modernbert")
    from transformers import ModernBertConfig

    torch.manual_seed(0)
    config = ModernBertConfig(
        hidden_size=128, num_attention_heads=4, num_hidden_layers=2, intermediate_size=96
    )
    layer = modeling.ModernBertEncoderLayer(config, layer_idx=1).eval()
    norm = layer.mlp_norm
    assert norm.bias is None and layer.attn_norm.bias is None  # ModernBERT: norm_bias=False
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        layer.attn_norm.weight.uniform_(0.5, 1.5)
        x, attn_out = torch.randn(2, 7, 128), torch.randn(2, 7, 128)
        w = layer.attn_norm.weight
        close(fused_layernorm(x, w, None, layer.attn_norm.eps), layer.attn_norm(x))
        h = x + attn_out  # the residual add before mlp_norm in ModernBertEncoderLayer.forward
        normed, summed = fused_add_layernorm(x, attn_out, norm.weight, norm.bias, norm.eps)
        close(summed, h)
        close(normed, norm(h))


def test_leading_dims_and_bf16():
    x = torch.randn(2, 3, 96).bfloat16()
    w = torch.ones(96)  # fp32 weight with bf16 activations, as in mixed-precision checkpoints
    out = fused_layernorm(x, w, None, 1e-5)
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    torch.testing.assert_close(
        out.float(), ref_layernorm(x.float(), w, None, 1e-5), rtol=1e-2, atol=1e-2
    )


def test_rejects_bad_args():
    x = torch.randn(3, 8)
    with pytest.raises(ValueError):
        fused_layernorm(x, torch.ones(7), None)
    with pytest.raises(ValueError):
        fused_add_layernorm(x, torch.randn(3, 8).double(), torch.ones(8), None)
