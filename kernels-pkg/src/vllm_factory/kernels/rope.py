"""Rotary position embedding (rotate-half / GPT-NeoX layout) as used by ModernBERT.

ModernBERT's global layers use theta 160000 and its sliding-window local layers theta 10000;
both go through :func:`fused_rope`, each with its own cache from :func:`build_rope_cache`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._dispatch import select_backend


def build_rope_cache(
    max_positions: int,
    head_dim: int,
    base: float,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(cos, sin)``, each ``[max_positions, head_dim // 2]``.

    Only one half is stored: rotate-half RoPE uses the same angle for dimension ``i`` and
    ``i + head_dim // 2``. Angles are computed in fp32 (as HF does) before any cast, so keep
    ``dtype=torch.float32`` for results that match HF's fp32 path.
    """
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even number, got {head_dim}")
    if max_positions <= 0:
        raise ValueError(f"max_positions must be positive, got {max_positions}")
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim
    inv_freq = 1.0 / (base**exponent)
    positions = torch.arange(max_positions, dtype=torch.float32, device=device)
    # Same product order as HF (position * inv_freq in fp32) so the angles are bit-identical.
    freqs = positions[:, None] * inv_freq[None, :]
    return freqs.cos().to(dtype), freqs.sin().to(dtype)


def _check_rope_args(q: Tensor, k: Tensor, positions: Tensor, cos: Tensor, sin: Tensor) -> None:
    if q.dim() != 3 or k.dim() != 3:
        raise ValueError(f"q and k must be [T, H, D], got {tuple(q.shape)} and {tuple(k.shape)}")
    tokens, _, head_dim = q.shape
    if k.shape[0] != tokens or k.shape[2] != head_dim:
        raise ValueError(f"k {tuple(k.shape)} does not match q {tuple(q.shape)}")
    if positions.dim() != 1 or positions.shape[0] != tokens:
        raise ValueError(f"positions must be [T={tokens}], got {tuple(positions.shape)}")
    if positions.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"positions must be int32 or int64, got {positions.dtype}")
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    if cos.shape != sin.shape or cos.dim() != 2 or cos.shape[1] != head_dim // 2:
        raise ValueError(
            f"cos/sin must both be [P, {head_dim // 2}], got {tuple(cos.shape)}, {tuple(sin.shape)}"
        )
    if not (q.is_floating_point() and k.is_floating_point()):
        raise ValueError("q and k must be floating point")


def _rope_torch(
    q: Tensor, k: Tensor, positions: Tensor, cos: Tensor, sin: Tensor
) -> tuple[Tensor, Tensor]:
    c = cos.index_select(0, positions.long()).float().unsqueeze(1)  # [T, 1, D/2]
    s = sin.index_select(0, positions.long()).float().unsqueeze(1)

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.float().chunk(2, dim=-1)
        # x * cat(c, c) + rotate_half(x) * cat(s, s), written per half.
        out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        return out.to(x.dtype)

    return rotate(q), rotate(k)


def fused_rope(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate ``q`` [T, Hq, D] and ``k`` [T, Hk, D] by the angles of ``positions`` [T].

    Equivalent to HF ModernBERT's ``apply_rotary_pos_emb`` (computed in fp32, cast back to the
    input dtype). Returns new tensors; the inputs are not modified. ``backend`` is
    ``"auto"``, ``"triton"`` or ``"torch"`` (see ``_dispatch``). Positions are not range-checked
    on the Triton path (that would need a device sync): keep them below ``cos.shape[0]``.
    """
    _check_rope_args(q, k, positions, cos, sin)
    if select_backend(backend, q, k, positions, cos, sin, kernel="fused_rope") == "triton":
        from ._triton_rope import rope_triton

        return rope_triton(q, k, positions, cos, sin)
    return _rope_torch(q, k, positions, cos, sin)
