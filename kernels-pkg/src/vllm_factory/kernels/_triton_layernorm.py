"""Triton LayerNorm and RMSNorm (+ optional fused residual add). Imported lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import triton
import triton.language as tl

from ._dispatch import next_power_of_2

if TYPE_CHECKING:
    from .layernorm import RMSOptions


@triton.jit
def _layernorm_kernel(
    x_ptr,
    res_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    sum_ptr,
    stride_x,
    stride_res,
    stride_y,
    stride_sum,
    width,
    eps,
    w_offset,
    HAS_RESIDUAL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    RMS: tl.constexpr,  # no mean subtraction (RMSNorm)
    ROUND_BEFORE_WEIGHT: tl.constexpr,  # normalised x rounded to the output dtype, then * w
    BLOCK: tl.constexpr,
):
    # One program per row; the whole row stays in registers, so x is read from memory once.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < width
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(res_ptr + row * stride_res + cols, mask=mask, other=0.0).to(tl.float32)
        # Round the sum to the storage dtype first so the norm sees what the unfused code sees.
        summed = (x + r).to(sum_ptr.dtype.element_ty)
        tl.store(sum_ptr + row * stride_sum + cols, summed, mask=mask)
        x = summed.to(tl.float32)
    if RMS:
        centered = x  # masked columns were loaded as 0
    else:
        mean = tl.sum(x, axis=0) / width
        centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / width  # two-pass: no E[x^2]-E[x]^2 cancellation
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32) + w_offset
    if ROUND_BEFORE_WEIGHT:
        y = (centered * rstd).to(y_ptr.dtype.element_ty).to(tl.float32) * w
    else:
        y = centered * rstd * w
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _rows(t: torch.Tensor) -> torch.Tensor:
    t2d = t.reshape(-1, t.shape[-1])
    return t2d if t2d.stride(-1) == 1 else t2d.contiguous()


def layernorm_triton(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    eps: float,
    rms: RMSOptions | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Return ``(normed, x + residual or None)``; arguments already validated. With ``rms``,
    RMSNorm with those options instead of LayerNorm."""
    shape = x.shape
    width = shape[-1]
    x2d = _rows(x)
    y = torch.empty(x2d.shape, dtype=x.dtype, device=x.device)
    res2d = _rows(residual) if residual is not None else None
    summed = torch.empty_like(y) if residual is not None else None
    if x2d.shape[0] > 0 and width > 0:
        block = next_power_of_2(width)
        weight = weight.contiguous()
        bias_c = bias.contiguous() if bias is not None else weight  # dummy, never read
        _layernorm_kernel[(x2d.shape[0],)](
            x2d,
            res2d if res2d is not None else x2d,  # dummy, never read
            weight,
            bias_c,
            y,
            summed if summed is not None else y,  # dummy, never written
            x2d.stride(0),
            res2d.stride(0) if res2d is not None else 0,
            y.stride(0),
            summed.stride(0) if summed is not None else 0,
            width,
            eps,
            0.0 if rms is None else rms.offset,
            HAS_RESIDUAL=residual is not None,
            HAS_BIAS=bias is not None,
            RMS=rms is not None,
            ROUND_BEFORE_WEIGHT=rms is not None and rms.round_before_weight,
            BLOCK=block,
            num_warps=min(16, max(1, block // 256)),
        )
    return y.reshape(shape), summed.reshape(shape) if summed is not None else None
