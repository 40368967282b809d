"""vLLM's FlashAttention (``vllm.vllm_flash_attn``) on our packed batch, on CUDA.

The CUDA build of vLLM ships FlashAttention with variable-length batches and a two-sided
sliding window, which is exactly ModernBERT's attention: no padding, no mask tensor, and the
window's out-of-band key blocks are never computed. It has no per-key mask, so a batch with
hidden keys (ColBERT queries) goes to ``PackedBatch`` instead, and FlashAttention takes only
fp16 / bf16 (fp32 goes to ``PackedBatch`` too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch
from vllm_factory.core import compat
from vllm_factory.core.packing import PackedLayout

logger = logging.getLogger(__name__)

FLASH_DTYPES = (torch.float16, torch.bfloat16)


@cache
def _flash_attn_varlen() -> Callable | None:
    varlen = compat.flash_attn_varlen_func()
    if varlen is None:
        logger.info("vllm.vllm_flash_attn not available; CUDA attention uses SDPA")
    return varlen


def flash_supports(dtype: torch.dtype, head_dim: int) -> bool:
    """True where vLLM's FlashAttention is installed and takes this dtype and head size."""
    return (
        dtype in FLASH_DTYPES
        and head_dim % 8 == 0
        and head_dim <= 256
        and (_flash_attn_varlen() is not None)
    )


@dataclass
class VarlenBatch:
    """Sequence boundaries of the packed ``[T]`` batch, as FlashAttention wants them."""

    cu_seqlens: torch.Tensor  # [S + 1] int32 offsets
    max_seqlen: int

    @classmethod
    def from_positions(cls, positions: torch.Tensor) -> VarlenBatch:
        layout = PackedLayout(positions)
        return cls(layout.cu_seqlens, layout.max_seqlen)

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        scale: float,
        half_window: int | None,
    ) -> torch.Tensor:
        """Bidirectional attention of packed ``[T, H, D]`` q/k/v; returns ``[T, H * D]``."""
        tokens, heads, head_dim = q.shape
        # FlashAttention's window is inclusive on both sides, like ModernBERT's band.
        window = [-1, -1] if half_window is None else [half_window, half_window]
        out = _flash_attn_varlen()(
            q,
            k,
            v,
            max_seqlen_q=self.max_seqlen,
            cu_seqlens_q=self.cu_seqlens,
            max_seqlen_k=self.max_seqlen,
            cu_seqlens_k=self.cu_seqlens,
            softmax_scale=scale,
            causal=False,
            window_size=window,
        )
        return out.reshape(tokens, heads * head_dim)
