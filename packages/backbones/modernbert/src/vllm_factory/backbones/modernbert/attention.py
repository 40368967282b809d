"""The ModernBERT encoder's eager attention layout for a forward: the kernels wheel's packed
layouts (``vllm_factory.kernels.packed_attention``, pure torch), with vLLM's own fused kernels
where they apply.

- CPU, ``LengthGroups``: vLLM's C++ CPU attention kernel (``cpu_kernel``) for the sequences
  whose keys are all visible; SDPA on unpadded views for the others. Every FLOP counts on a CPU.
- GPU, ``VarlenBatch`` (``cuda_kernel``): vLLM's FlashAttention over the unpadded batch, with
  the sliding window done by the kernel, when no key is hidden and the dtype is fp16 / bf16.
- GPU otherwise, ``PackedBatch``: one padded ``[B, L]`` SDPA call per layer with a key mask.

Every layout goes through ``vllm_factory.kernels.packed_attention.packed_attention``.
"""

from __future__ import annotations

import torch
from vllm_factory.backbones.modernbert.cpu_kernel import KernelBatch, kernel_supports
from vllm_factory.backbones.modernbert.cuda_kernel import VarlenBatch, flash_supports
from vllm_factory.kernels import packed_attention as packed
from vllm_factory.kernels.packed_attention import LengthGroups, PackedBatch


def attention_batch(
    positions: torch.Tensor,
    hidden_keys: torch.Tensor | None = None,
    head_dim: int | None = None,
    dtype: torch.dtype | None = None,
) -> PackedBatch | LengthGroups | VarlenBatch:
    """The per-forward attention layout for this device (see the module docstring);
    ``head_dim`` and ``dtype`` (when given and supported) enable vLLM's kernels."""
    if not positions.is_cuda:
        fused = None
        if head_dim is not None and kernel_supports(head_dim):
            fused = KernelBatch.from_lengths
        return packed.attention_batch(positions, hidden_keys, fused)
    plain = hidden_keys is None or not bool(hidden_keys.any())
    if plain and head_dim is not None and dtype is not None and flash_supports(dtype, head_dim):
        return VarlenBatch.from_positions(positions)
    return packed.attention_batch(positions, hidden_keys)
