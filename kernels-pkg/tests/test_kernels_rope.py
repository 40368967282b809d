"""RoPE fallback vs a naive reference and vs HF ModernBERT (fp32, CPU)."""

from __future__ import annotations

import pytest
import torch
from kernels_reference import close, ref_rope
from vllm_factory.kernels import build_rope_cache, fused_rope

SHAPES = [(1, 4, 2, 32), (7, 12, 12, 64), (130, 3, 1, 32), (130, 12, 12, 64), (5, 2, 2, 96)]


@pytest.mark.parametrize(("tokens", "hq", "hk", "head_dim"), SHAPES)
@pytest.mark.parametrize("base", [10000.0, 160000.0])
def test_fallback_matches_reference(tokens: int, hq: int, hk: int, head_dim: int, base: float):
    g = torch.Generator().manual_seed(tokens * 31 + head_dim)
    q = torch.randn(tokens, hq, head_dim, generator=g)
    k = torch.randn(tokens, hk, head_dim, generator=g)
    positions = torch.randint(0, 512, (tokens,), generator=g)
    cos, sin = build_rope_cache(512, head_dim, base)
    q_out, k_out = fused_rope(q, k, positions, cos, sin, backend="torch")
    q_ref, k_ref = ref_rope(q, k, positions, head_dim, base)
    close(q_out, q_ref)
    close(k_out, k_ref)
    assert q_out.shape == q.shape and k_out.shape == k.shape


def test_auto_on_cpu_equals_torch_backend():
    cos, sin = build_rope_cache(16, 32, 10000.0)
    q, k = torch.randn(7, 2, 32), torch.randn(7, 2, 32)
    pos = torch.arange(7)
    for a, b in zip(
        fused_rope(q, k, pos, cos, sin), fused_rope(q, k, pos, cos, sin, backend="torch")
    ):
        assert torch.equal(a, b)


def test_inputs_not_modified_and_strided_views():
    # q/k as views into a fused qkv buffer: token stride is 3 * H * D, not H * D.
    cos, sin = build_rope_cache(64, 32, 160000.0)
    qkv = torch.randn(9, 3, 4, 32)
    q, k = qkv[:, 0], qkv[:, 1]
    before = qkv.clone()
    pos = torch.arange(9) * 3
    q_out, k_out = fused_rope(q, k, pos, cos, sin)
    assert torch.equal(qkv, before)
    q_ref, k_ref = ref_rope(q, k, pos, 32, 160000.0)
    close(q_out, q_ref)
    close(k_out, k_ref)


def test_bf16_roundtrip_dtype():
    cos, sin = build_rope_cache(32, 64, 10000.0)
    q = torch.randn(5, 2, 64).bfloat16()
    k = torch.randn(5, 1, 64).bfloat16()
    q_out, k_out = fused_rope(q, k, torch.arange(5), cos, sin)
    assert q_out.dtype == torch.bfloat16 and k_out.dtype == torch.bfloat16
    q_ref, _ = ref_rope(q.float(), k.float(), torch.arange(5), 64, 10000.0)
    torch.testing.assert_close(q_out.float(), q_ref, rtol=1e-2, atol=1e-2)


def test_rejects_bad_shapes():
    cos, sin = build_rope_cache(8, 32, 10000.0)
    with pytest.raises(ValueError):
        fused_rope(torch.randn(3, 2, 32), torch.randn(4, 2, 32), torch.arange(3), cos, sin)
    with pytest.raises(ValueError):
        fused_rope(torch.randn(3, 2, 64), torch.randn(3, 2, 64), torch.arange(3), cos, sin)
    with pytest.raises(ValueError):
        build_rope_cache(8, 33, 10000.0)


# --- HF transformers ModernBERT ------------------------------------------------------------
@pytest.mark.parametrize("layer_type", ["full_attention", "sliding_attention"])
@pytest.mark.parametrize(("hidden", "heads"), [(128, 4), (768, 12), (96, 3)])
def test_matches_hf_modernbert(layer_type: str, hidden: int, heads: int):
    modeling = pytest.importorskip("transformers.models.modernbert.modeling_modernbert")
    from transformers import ModernBertConfig

    config = ModernBertConfig(
        hidden_size=hidden,
        num_attention_heads=heads,
        num_hidden_layers=3,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    head_dim = hidden // heads
    theta = config.rope_parameters[layer_type]["rope_theta"]
    assert theta == (160000.0 if layer_type == "full_attention" else 10000.0)
    rotary = modeling.ModernBertRotaryEmbedding(config)

    tokens = 130
    g = torch.Generator().manual_seed(hidden)
    q = torch.randn(tokens, heads, head_dim, generator=g)
    k = torch.randn(tokens, heads, head_dim, generator=g)
    positions = torch.randint(0, 256, (tokens,), generator=g)

    hf_cos, hf_sin = rotary(q, positions[None], layer_type)  # [1, T, D], halves duplicated
    cos, sin = build_rope_cache(256, head_dim, theta)
    close(cos[positions], hf_cos[0, :, : head_dim // 2])
    close(cos[positions], hf_cos[0, :, head_dim // 2 :])
    close(sin[positions], hf_sin[0, :, : head_dim // 2])

    q_hf, k_hf = modeling.apply_rotary_pos_emb(q, k, hf_cos[0], hf_sin[0], unsqueeze_dim=1)
    q_out, k_out = fused_rope(q, k, positions, cos, sin)
    close(q_out, q_hf)
    close(k_out, k_hf)
