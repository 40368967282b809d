"""LayerNorm over the last dim, alone or fused with the residual add before it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

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


def _pick(backend: str, x: torch.Tensor, *tensors: torch.Tensor | None) -> str:
    choice = select_backend(backend, x, *(t for t in tensors if t is not None))
    if choice == "triton" and x.shape[-1] > MAX_TRITON_WIDTH:
        if backend == "triton":
            raise ValueError(f"Triton LayerNorm supports widths <= {MAX_TRITON_WIDTH}")
        choice = "torch"
    announce("layernorm", choice)
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
