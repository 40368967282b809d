"""LayerNorm and RMSNorm over the last dim (LayerNorm also fused with the residual add before
it), with fp32 statistics; :class:`RMSNorm` is the module the RMSNorm encoders hold."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ._dispatch import announce, select_backend

# Widest row the Triton kernel keeps in registers; wider rows go to PyTorch under "auto".
MAX_TRITON_WIDTH = 16384


def _check_norm_args(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    if x.dim() < 1 or not x.is_floating_point():
        raise ValueError(f"x must be a floating point tensor, got {x.dtype} {tuple(x.shape)}")
    width = x.shape[-1]
    if weight.shape != (width,):
        raise ValueError(f"weight must be [{width}], got {tuple(weight.shape)}")
    if bias is not None and bias.shape != (width,):
        raise ValueError(f"bias must be [{width}] or None, got {tuple(bias.shape)}")


def _layernorm_torch(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float
) -> torch.Tensor:
    b = None if bias is None else bias.float()
    return F.layer_norm(x.float(), (x.shape[-1],), weight.float(), b, eps).to(x.dtype)


def _pick(
    backend: str, x: torch.Tensor, *tensors: torch.Tensor | None, kernel: str = "layernorm"
) -> str:
    choice = select_backend(backend, x, *(t for t in tensors if t is not None))
    if choice == "triton" and x.shape[-1] > MAX_TRITON_WIDTH:
        if backend == "triton":
            raise ValueError(f"Triton LayerNorm supports widths <= {MAX_TRITON_WIDTH}")
        choice = "torch"
    announce(kernel, choice)
    return choice


def fused_layernorm(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    eps: float = 1e-5,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """LayerNorm of ``x`` over its last dim with fp32 statistics, returned in ``x.dtype``.

    ``bias=None`` is ModernBERT's ``nn.LayerNorm(..., bias=False)``.
    """
    _check_norm_args(x, weight, bias)
    if _pick(backend, x, weight, bias) == "triton":
        from ._triton_layernorm import layernorm_triton

        return layernorm_triton(x, None, weight, bias, eps)[0]
    return _layernorm_torch(x, weight, bias, eps)


def fused_add_layernorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    eps: float = 1e-5,
    *,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(layer_norm(x + residual), x + residual)``.

    The sum is rounded to ``x.dtype`` before it is normalised, as in the unfused
    ``h = x + residual; norm(h)``, so the fused result matches the two-step code.
    """
    _check_norm_args(x, weight, bias)
    if residual.shape != x.shape or residual.dtype != x.dtype:
        raise ValueError(
            f"residual must match x: {tuple(residual.shape)} {residual.dtype} vs "
            f"{tuple(x.shape)} {x.dtype}"
        )
    if _pick(backend, x, residual, weight, bias) == "triton":
        from ._triton_layernorm import layernorm_triton

        normed, summed = layernorm_triton(x, residual, weight, bias, eps)
        assert summed is not None
        return normed, summed
    summed = x + residual
    return _layernorm_torch(summed, weight, bias, eps), summed


class RMSOptions(NamedTuple):
    """How a model's RMSNorm applies its weight: ``offset`` is added to it (Gemma stores
    ``weight - 1``); ``round_before_weight``: the normalised ``x`` is rounded to ``x.dtype``
    before it is multiplied (transformers' Llama, T5 and LFM2 norms), otherwise the product is
    formed in fp32 and rounded once (Gemma's)."""

    offset: float = 0.0
    round_before_weight: bool = False


PLAIN_RMS = RMSOptions()


def _rmsnorm_torch(x: torch.Tensor, weight: torch.Tensor, eps: float, rms: RMSOptions):
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if rms.round_before_weight:
        if rms.offset == 0.0 and weight.dtype == x.dtype:
            return weight * normed.to(x.dtype)
        return ((weight.float() + rms.offset) * normed.to(x.dtype).float()).to(x.dtype)
    return (normed * (rms.offset + weight.float())).to(x.dtype)


def fused_rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    rms: RMSOptions = PLAIN_RMS,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """RMSNorm of ``x`` over its last dim, ``x / sqrt(mean(x^2) + eps) * (weight + offset)``
    with fp32 statistics, returned in ``x.dtype`` (see :class:`RMSOptions`)."""
    _check_norm_args(x, weight, None)
    if _pick(backend, x, weight, kernel="rmsnorm") == "triton":
        from ._triton_layernorm import layernorm_triton

        return layernorm_triton(x, None, weight, None, eps, rms)[0]
    return _rmsnorm_torch(x, weight, eps, rms)


class RMSNorm(nn.Module):
    """An RMSNorm layer over :func:`fused_rmsnorm`; its parameter is ``weight`` (``[size]``,
    initialised so that ``weight + offset`` is 1), as in transformers' checkpoints."""

    def __init__(self, size: int, eps: float, rms: RMSOptions = PLAIN_RMS) -> None:
        super().__init__()
        self.eps = eps
        self.rms = rms
        self.weight = nn.Parameter(torch.full((size,), 1.0 - rms.offset))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_rmsnorm(x, self.weight, self.eps, self.rms)
