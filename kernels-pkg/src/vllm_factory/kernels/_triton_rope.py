"""Triton RoPE kernel. Imported lazily, only once the Triton backend was selected."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from ._dispatch import next_power_of_2


@triton.jit
def _rotate_heads(
    x_ptr,
    o_ptr,
    tok,
    stride_xt,
    stride_xh,
    stride_ot,
    stride_oh,
    n_heads,
    half,
    c,
    s,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    heads = tl.arange(0, BLOCK_H)
    dims = tl.arange(0, BLOCK_D)
    mask = (heads[:, None] < n_heads) & (dims[None, :] < half)
    x_off = tok * stride_xt + heads[:, None] * stride_xh + dims[None, :]
    o_off = tok * stride_ot + heads[:, None] * stride_oh + dims[None, :]
    x1 = tl.load(x_ptr + x_off, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + x_off + half, mask=mask, other=0.0).to(tl.float32)
    out_ty = o_ptr.dtype.element_ty
    tl.store(o_ptr + o_off, (x1 * c - x2 * s).to(out_ty), mask=mask)
    tl.store(o_ptr + o_off + half, (x2 * c + x1 * s).to(out_ty), mask=mask)


@triton.jit
def _rope_kernel(
    q_ptr,
    k_ptr,
    qo_ptr,
    ko_ptr,
    pos_ptr,
    cos_ptr,
    sin_ptr,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_qot,
    stride_qoh,
    stride_kot,
    stride_koh,
    stride_cos,
    stride_sin,
    n_q_heads,
    n_k_heads,
    half,
    BLOCK_HQ: tl.constexpr,
    BLOCK_HK: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # One program per token: the cos/sin row is loaded once and shared by all q and k heads.
    tok = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + tok).to(tl.int64)
    dims = tl.arange(0, BLOCK_D)
    dmask = dims < half
    c = tl.load(cos_ptr + pos * stride_cos + dims, mask=dmask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + pos * stride_sin + dims, mask=dmask, other=0.0).to(tl.float32)
    c = c[None, :]
    s = s[None, :]
    _rotate_heads(
        q_ptr, qo_ptr, tok, stride_qt, stride_qh, stride_qot, stride_qoh,
        n_q_heads, half, c, s, BLOCK_HQ, BLOCK_D,
    )  # fmt: skip
    _rotate_heads(
        k_ptr, ko_ptr, tok, stride_kt, stride_kh, stride_kot, stride_koh,
        n_k_heads, half, c, s, BLOCK_HK, BLOCK_D,
    )  # fmt: skip


def _last_dim_contiguous(x: torch.Tensor) -> torch.Tensor:
    # Strided token/head dims are fine (e.g. q/k views of a fused qkv); the head dim is not.
    return x if x.stride(-1) == 1 else x.contiguous()


def rope_triton(
    q: Tensor, k: Tensor, positions: Tensor, cos: Tensor, sin: Tensor
) -> tuple[Tensor, Tensor]:
    """Triton implementation of ``fused_rope`` (arguments already validated)."""
    q = _last_dim_contiguous(q)
    k = _last_dim_contiguous(k)
    cos = _last_dim_contiguous(cos)
    sin = _last_dim_contiguous(sin)
    positions = positions.contiguous()
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    tokens, n_q_heads, head_dim = q.shape
    n_k_heads = k.shape[1]
    if tokens == 0:
        return q_out, k_out
    half = head_dim // 2
    _rope_kernel[(tokens,)](
        q, k, q_out, k_out, positions, cos, sin,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        cos.stride(0), sin.stride(0),
        n_q_heads, n_k_heads, half,
        BLOCK_HQ=next_power_of_2(n_q_heads),
        BLOCK_HK=next_power_of_2(n_k_heads),
        BLOCK_D=next_power_of_2(half),
    )  # fmt: skip
    return q_out, k_out
