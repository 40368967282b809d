"""GeGLU: ``gelu(input) * gate`` where ``input, gate = x.chunk(2, -1)`` (ModernBERT's MLP)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._dispatch import select_backend

_APPROXIMATIONS = ("none", "tanh")


def _check_geglu_args(x: torch.Tensor, approximate: str) -> None:
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"approximate must be one of {_APPROXIMATIONS}, got {approximate!r}")
    if x.dim() < 1 or x.shape[-1] % 2:
        raise ValueError(f"last dim of x must be even (2 * I), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"x must be floating point, got {x.dtype}")


def _geglu_torch(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    # fp32 math with one rounding at the end, like the Triton kernel, so both paths agree in bf16.
    inp, gate = x.float().chunk(2, dim=-1)
    return (F.gelu(inp, approximate=approximate) * gate).to(x.dtype)


def fused_geglu(
    x: torch.Tensor, approximate: str = "none", *, backend: str = "auto"
) -> torch.Tensor:
    """Return ``gelu(x[..., :I], approximate) * x[..., I:]`` with shape ``[..., I]``.

    ``approximate="none"`` is the exact erf GELU (ModernBERT ``hidden_activation="gelu"``),
    ``"tanh"`` the tanh approximation. Computed in fp32, returned in ``x.dtype``.
    """
    _check_geglu_args(x, approximate)
    if select_backend(backend, x, kernel="fused_geglu") == "triton":
        from ._triton_geglu import geglu_triton

        return geglu_triton(x, approximate)
    return _geglu_torch(x, approximate)
