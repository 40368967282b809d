"""The DeBERTa encoder's torch custom ops: its attention and DeBERTa-v2's convolution on vLLM's
packed token batch, each writing into an ``out`` buffer rather than returning a tensor.

``vllm_factory::deberta_attention`` and ``vllm_factory::deberta_conv`` are the split points of a
compiled encoder: they read the sequence layout from the positions on the host (once per model
step, shared by every layer through the step cache a backbone installs in
``packed_step_cache``) and run eagerly between the graph's pieces.
``vllm_factory::deberta_attention_rows`` needs no host data (per-row sequence bounds computed on
the device), so it stays inside the graph and its CUDA graphs. Under piecewise CUDA graphs the
piece after a split point replays reading the addresses seen at capture, hence the output
buffer the piece before allocated.

Each op's schema is written out (the names are what compiled graphs and vLLM's splitting-ops
lists refer to); the Python bodies take the same arguments in the same order. Pure torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from vllm_factory.core.packing import PackedLayout

from .deberta_attention import _softmax_scale, flash_deberta_attention, relative_position_index
from .packed_step_cache import step_cached
from .rows_attention import _writes_out_only, attention_by_rows

ATTENTION_OP = "vllm_factory::deberta_attention"
ROWS_OP = "vllm_factory::deberta_attention_rows"
CONV_OP = "vllm_factory::deberta_conv"


@dataclass
class PackedSequences:
    """Sequence boundaries of vLLM's packed batch, computed once per forward."""

    layout: PackedLayout
    rel_index: torch.Tensor | None  # relative-position bucket table, shared by all layers

    @classmethod
    def from_positions(
        cls, positions: torch.Tensor, span: int, buckets: int, max_rel: int
    ) -> PackedSequences:
        layout = PackedLayout(positions)
        rel_index = None
        if span and layout.max_seqlen:
            rel_index = relative_position_index(
                layout.max_seqlen, span, buckets, max_rel, positions.device
            )
        return cls(layout, rel_index)

    @property
    def cu_seqlens(self) -> torch.Tensor:
        return self.layout.cu_seqlens

    @property
    def max_seqlen(self) -> int:
        return self.layout.max_seqlen

    def _flat(self) -> torch.Tensor:
        """Slot of each packed token in the flattened ``[B * L]`` padded batch."""
        return self.layout.seq_of_token * self.max_seqlen + self.layout.positions.long()

    def pad(self, packed: torch.Tensor) -> torch.Tensor:
        """``[T, C]`` -> ``[B, L, C]`` with zeros past each sequence's end."""
        batch, length = self.layout.num_seqs, self.max_seqlen
        out = packed.new_zeros(batch * length, packed.shape[-1])
        out[self._flat()] = packed
        return out.view(batch, length, -1)

    def unpad(self, padded: torch.Tensor) -> torch.Tensor:
        return padded.reshape(-1, padded.shape[-1])[self._flat()]


def owned_layout(
    positions: torch.Tensor, span: int, buckets: int, max_rel: int
) -> tuple[int, PackedSequences]:
    """The first row that a sequence owns, and the layout (with its relative-position table)
    of the rows from it; built once per model step. Rows before the first start (only a dummy
    run with stale positions has them) belong to no sequence; the kernels need every row they
    see to be in one."""

    def build() -> tuple[int, PackedSequences]:
        packed = PackedSequences.from_positions(positions, span, buckets, max_rel)
        starts = packed.layout.host_starts
        first = starts[0] if starts else positions.numel()
        if 0 < first < positions.numel():
            packed = PackedSequences.from_positions(positions[first:], span, buckets, max_rel)
        return first, packed

    return step_cached(("deberta", span, buckets, max_rel), positions, build)


def _packed_attention(q, k, v, positions, c2p, p2c, scale_factor, span, buckets, max_rel, out):
    """``flash_deberta_attention`` of packed ``[T, H, D]`` q/k/v into ``out``, with the
    relative scores ``[H, T, 2 * span]`` the graph piece before it computed (one launch per
    layer between the pieces)."""
    first, packed = owned_layout(positions, span, buckets, max_rel)
    if first < q.shape[0]:
        o = slice(first, None)
        flash_deberta_attention(
            q[o], k[o], v[o], packed.cu_seqlens, packed.max_seqlen, scale_factor=scale_factor,
            rel_index=packed.rel_index, c2p=None if c2p is None else c2p[:, o],
            p2c=None if p2c is None else p2c[:, o], out=out[o],
        )  # fmt: skip
    if first:
        out[:first].zero_()


def _rows_attention(
    q, k, v, row_start, row_end, rel_index, c2p, p2c, scale_factor, max_seqlen, out
):
    """``attention_by_rows`` with DeBERTa's relative terms, of packed ``[T, H, D]`` q/k/v into
    ``out``."""
    attention_by_rows(
        q, k, v, row_start, row_end, max_seqlen, scale=_softmax_scale(q, c2p, p2c, scale_factor),
        out=out, bias_index=rel_index, c2p=c2p, p2c=p2c,
    )  # fmt: skip


def _packed_conv(x, positions, weight, bias, groups, out):
    """1-D convolution of each packed sequence on its own (zero padding at both ends)."""
    first, packed = owned_layout(positions, 0, -1, -1)
    if first < x.shape[0]:
        padded = packed.pad(x[first:]).transpose(1, 2)
        conv = F.conv1d(padded, weight, bias, padding=(weight.shape[-1] - 1) // 2, groups=groups)
        out[first:].copy_(packed.unpad(conv.transpose(1, 2)))
    out[:first].zero_()


def _register(name: str, body: Callable[..., None], schema: str) -> None:
    op = torch.library.custom_op(name, body, mutates_args=("out",), schema=schema)
    op.register_fake(_writes_out_only)


_register(
    ATTENTION_OP, _packed_attention,
    "(Tensor q, Tensor k, Tensor v, Tensor positions, Tensor? c2p, Tensor? p2c, "
    "SymInt scale_factor, SymInt span, SymInt buckets, SymInt max_rel, Tensor(a10!) out) -> ()",
)  # fmt: skip
_register(
    ROWS_OP, _rows_attention,
    "(Tensor q, Tensor k, Tensor v, Tensor row_start, Tensor row_end, Tensor? rel_index, "
    "Tensor? c2p, Tensor? p2c, SymInt scale_factor, SymInt max_seqlen, Tensor(a10!) out) -> ()",
)  # fmt: skip
_register(
    CONV_OP, _packed_conv,
    "(Tensor x, Tensor positions, Tensor weight, Tensor? bias, SymInt groups, "
    "Tensor(a5!) out) -> ()",
)  # fmt: skip
