"""Attention over a packed token batch whose key range is given per row, on the device.

vLLM hands an encoder one flat ``[T]`` batch of whole sequences, each starting where its
position is 0. :func:`sequence_bounds` turns the positions into each row's sequence
``[start, end)`` with device operations alone; :func:`window_bounds` narrows them to a
two-sided sliding window. :func:`attention_by_rows` then attends each row to its own range: the
Triton launch depends on ``T`` alone, so a CUDA graph can hold the whole step (no per-sequence
host data, no split point in a compiled encoder). :func:`visible_ends` hides a sequence's
trailing run of one token from every row (ColBERT's query expansion), on the device as well.
Relative terms join the scores inside the kernel: a per-head bias by distance (T5's bucketed
position bias) or DeBERTa's c2p / p2c scores.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from vllm_factory.core import envs

from ._dispatch import select_backend, triton_available, triton_disabled


def in_graph_attention_chosen(device_type: str | None, wanted: bool) -> bool:
    """Whether an encoder attends in its compiled graph with :func:`attention_by_rows`: where
    ``wanted`` (the encoder's switch in ``vllm_factory.core.envs``), only ever on a ``"cuda"``
    device with Triton usable (the PyTorch fallback reads the ranges on the host, which no CUDA
    graph can hold)."""
    return wanted and device_type == "cuda" and triton_available() and not triton_disabled()


def in_graph_attention_switched(switch: envs.Setting[bool], device_type: str | None) -> bool:
    """:func:`in_graph_attention_chosen` with ``wanted`` read from an encoder's ``switch`` (on
    by default; set off, it says once that off is a former default)."""
    wanted = envs.get(switch)
    if not wanted:
        envs.say_former_default(switch)
    return in_graph_attention_chosen(device_type, wanted)


def sequence_bounds(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int32 ``[T]`` start and (exclusive) end of every token's sequence in a packed batch in
    which each sequence starts where its position is 0; device operations only (no host
    synchronisation, so a CUDA graph can hold them). Rows before the first start (stale
    positions of a dummy run) form one run up to it."""
    total = positions.numel()
    index = torch.arange(total, device=positions.device)
    start = (index - positions.long()).clamp_(min=0)
    starts_at = torch.where(positions == 0, index, total)
    # the first start strictly after each row: a suffix minimum, shifted by one
    suffix = torch.flip(torch.cummin(torch.flip(starts_at, (0,)), 0).values, (0,))
    end = torch.cat((suffix[1:], suffix.new_full((1,), total)))
    return start.to(torch.int32), end.to(torch.int32)


def window_bounds(
    row_start: torch.Tensor, row_end: torch.Tensor, half_window: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``row_start`` / ``row_end`` narrowed to the keys ``j`` with ``|i - j| <= half_window``
    (a band that includes both ends, as ModernBERT's local attention); device operations only."""
    index = torch.arange(row_start.numel(), device=row_start.device, dtype=torch.int32)
    start = torch.maximum(row_start, index - half_window)
    end = torch.minimum(row_end, index + half_window + 1)
    return start, end


def visible_ends(
    input_ids: torch.Tensor, positions: torch.Tensor, row_end: torch.Tensor, token_id: int
) -> torch.Tensor:
    """int32 ``[T]``: for each row, the end of its sequence's keys once the sequence's
    trailing run of ``token_id`` is hidden (a sequence's first token never is); ``row_end``
    from :func:`sequence_bounds`. Device operations only."""
    index = torch.arange(input_ids.numel(), device=input_ids.device)
    kept = (input_ids != token_id) | (positions == 0)
    last_kept = torch.cummax(torch.where(kept, index, -1), 0).values  # at or before each row
    return (last_kept[row_end.long() - 1] + 1).to(torch.int32)


def attention_by_rows(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    row_start: torch.Tensor,
    row_end: torch.Tensor,
    max_seqlen: int,
    *,
    scale: float | None = None,
    out: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    bias_index: torch.Tensor | None = None,
    c2p: torch.Tensor | None = None,
    p2c: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Softmax attention of every row ``i`` of packed ``[T, H, D]`` q / k / v over the keys
    ``row_start[i] <= j < row_end[i]`` (``[T]`` on the device; a row with an empty range gets
    zeros), scaled by ``scale`` (default ``1 / sqrt(D)``); ``[T, H, D]``, into ``out`` when
    given. ``max_seqlen`` bounds the ranges' lengths (Triton block sizes only). The Triton
    kernel needs no host value but ``T``; the PyTorch fallback reads the ranges on the host.

    Relative terms join each score before the scale, through ``bias_index`` (integer
    ``[2 * span - 1]`` on the device: entry ``d + span - 1`` for distance ``d = i - j``, clamped
    to ``[-(span - 1), span - 1]``), either
    - ``bias`` ``[H, buckets]``: ``bias[h, bias_index[.]]`` (T5: the bucket of each distance;
      its buckets stop changing past ``max_distance``, so ``span = max_distance + 1`` serves
      any length), or
    - DeBERTa's ``c2p`` / ``p2c`` ``[H, T, 2 * att_span]`` (``deberta_attention.relative_scores``)
      with ``bias_index`` from ``relative_position_index`` for at least ``max_seqlen``:
      ``c2p[h, i, bias_index[.]] + p2c[h, j, bias_index[.]]``; ``scale`` is then
      ``1 / sqrt(D * factor)`` as :func:`flash_deberta_attention` counts it."""
    if q.dim() != 3 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must be [T, H, D] alike, got {q.shape}, {k.shape}, {v.shape}")
    _check_rows(q, row_start, row_end)
    _check_out(q, out)
    _check_terms(q, max_seqlen, bias, bias_index, c2p, p2c)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    rows = RowsInputs(q, k, v, row_start, row_end, max(max_seqlen, 1), scale)
    terms = {"rel_index": bias_index, "bias": bias, "c2p": c2p, "p2c": p2c}
    tensors = [t for t in (q, k, v, row_start, row_end, c2p, p2c) if t is not None]
    if select_backend(backend, *tensors, kernel="attention_by_rows") == "triton":
        return rows_triton(out, rows, **terms)
    result = _attention_by_rows_torch(rows, **terms)
    return result if out is None else out.copy_(result)


ROWS_OP = "vllm_factory::attention_by_rows"


# One torch op for the encoders that attend in their compiled graph (ModernBERT, mT5): dynamo
# keeps it whole (it does not trace into the Triton launch, and under compile the kernels'
# "auto" would pick the fallback), the launch depends on the token count alone so a CUDA graph
# holds it, and it writes into the buffer the graph allocated.
def _attention_by_rows_op(q, k, v, row_start, row_end, max_seqlen, scale, bias, bias_index, out):
    """:func:`attention_by_rows` into ``out``, as ``torch.ops.vllm_factory.attention_by_rows``."""
    attention_by_rows(
        q, k, v, row_start, row_end, max_seqlen, scale=scale, out=out, bias=bias,
        bias_index=bias_index,
    )  # fmt: skip


def _writes_out_only(*args: object) -> None:
    """The fake (meta) implementation of an op that fills ``out`` and returns nothing."""


torch.library.custom_op(
    ROWS_OP, _attention_by_rows_op, mutates_args=("out",),
    schema="(Tensor q, Tensor k, Tensor v, Tensor row_start, Tensor row_end, SymInt max_seqlen, "
    "float scale, Tensor? bias, Tensor? bias_index, Tensor(a9!) out) -> ()",
).register_fake(_writes_out_only)  # fmt: skip


def _check_rows(q: torch.Tensor, row_start: torch.Tensor, row_end: torch.Tensor) -> None:
    if row_start.shape != (q.shape[0],) or row_end.shape != (q.shape[0],):
        raise ValueError("row_start and row_end must be [T]")


def _check_out(q: torch.Tensor, out: torch.Tensor | None) -> None:
    if out is not None and (out.shape != q.shape or out.dtype != q.dtype):
        raise ValueError(f"out must be [T, H, D] of {q.dtype}, got {tuple(out.shape)} {out.dtype}")


def _check_terms(
    q: torch.Tensor,
    max_seqlen: int,
    bias: torch.Tensor | None,
    index: torch.Tensor | None,
    c2p: torch.Tensor | None,
    p2c: torch.Tensor | None,
) -> None:
    """Validate the relative terms of :func:`attention_by_rows` (a ``bias_index`` without
    terms is unused: DeBERTa's relative table where neither c2p nor p2c is on)."""
    relative = check_scores(q, c2p, p2c, 0) > 0
    if bias is not None and relative:
        raise ValueError("give bias or c2p / p2c, not both")
    if (bias is not None or relative) and index is None:
        raise ValueError("bias or c2p / p2c without bias_index: they go together")
    if index is None:
        return
    if index.dim() != 1 or index.numel() % 2 == 0 or index.dtype.is_floating_point:
        raise ValueError(f"bias_index must be integer [2 * span - 1], got {tuple(index.shape)}")
    if bias is not None and (bias.dim() != 2 or bias.shape[0] != q.shape[1]):
        raise ValueError(
            f"bias must be [H, buckets] with H = {q.shape[1]}, got {tuple(bias.shape)}"
        )
    if relative and index.numel() < 2 * max_seqlen - 1:
        raise ValueError("c2p / p2c need bias_index from relative_position_index(>= max_seqlen)")


def check_scores(
    q: torch.Tensor, c2p: torch.Tensor | None, p2c: torch.Tensor | None, span: int
) -> int:
    """Validate DeBERTa's relative scores (``[H, T, 2 * span]``) against ``q``; return
    ``span`` (the one given where there are none)."""
    tokens, heads = q.shape[:2]
    for name, scores in (("c2p", c2p), ("p2c", p2c)):
        if scores is None:
            continue
        if scores.dim() != 3 or scores.shape[:2] != (heads, tokens) or scores.shape[2] % 2:
            raise ValueError(f"{name} must be [H, T, 2 * span], got {tuple(scores.shape)}")
        if span and scores.shape[2] // 2 != span:
            raise ValueError("the relative terms must have the same span")
        span = scores.shape[2] // 2
    return span


def _into(out: torch.Tensor | None, q: torch.Tensor, launch) -> torch.Tensor:
    """Run a Triton ``launch(target)`` into ``out`` where the kernels can write it (last
    dimension contiguous), else into a new buffer (copied into ``out`` when given)."""
    target = out if out is not None and out.stride(-1) == 1 else torch.empty_like(q)
    launch(target)
    return target if out is None or target is out else out.copy_(target)


class RowsInputs(NamedTuple):
    """What both row-range attentions hand their Triton launch: packed ``[T, H, D]`` q / k / v,
    each row's key range, the bound on the ranges' lengths and the softmax scale."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    row_start: torch.Tensor
    row_end: torch.Tensor
    max_seqlen: int
    sm_scale: float


def rows_triton(
    out: torch.Tensor | None, x: RowsInputs, **terms: torch.Tensor | None
) -> torch.Tensor:
    """The Triton path of the row-range attention (:func:`attention_by_rows`, with its
    relative ``terms``), into ``out`` (see :func:`_into`)."""
    from ._triton_deberta_attention import deberta_attention_rows_triton

    return _into(out, x.q, lambda target: deberta_attention_rows_triton(x, out=target, **terms))


def _attention_by_rows_torch(
    x: RowsInputs,
    rel_index: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    c2p: torch.Tensor | None = None,
    p2c: torch.Tensor | None = None,
    chunk: int = 256,
) -> torch.Tensor:
    """The fallback: ``chunk`` rows at a time, over the union of their ranges with a per-row
    mask, in fp32."""
    q, k, v, row_start, row_end, _, scale = x
    span = 0 if rel_index is None else (rel_index.numel() + 1) // 2
    total = q.shape[0]
    out = torch.zeros_like(q)
    start, end = row_start.long().cpu(), row_end.long().cpu()
    for lo_row in range(0, total, chunk):
        rows = slice(lo_row, min(lo_row + chunk, total))
        lo, hi = int(start[rows].min()), int(end[rows].max())
        if hi <= lo:
            continue
        keys = torch.arange(lo, hi)
        allowed = (keys[None, :] >= start[rows, None]) & (keys[None, :] < end[rows, None])
        scores = torch.einsum("thd,khd->htk", q[rows].float(), k[lo:hi].float())
        if rel_index is not None:
            distance = torch.arange(rows.start, rows.stop)[:, None] - keys[None, :]
            slot = distance.clamp(-(span - 1), span - 1) + span - 1
            column = rel_index.to(q.device).long()[slot.to(q.device)]  # [rows, keys]
            if bias is not None:
                scores = scores + bias.float()[:, column]
            if c2p is not None:  # the row's projection at the pair's bucket
                scores = scores + c2p[:, rows].float().gather(
                    -1, column.expand(c2p.shape[0], -1, -1)
                )
            if p2c is not None:  # the key's projection at the pair's bucket
                key = torch.arange(hi - lo, device=p2c.device)[None, :]
                scores = scores + p2c[:, lo:hi].float()[:, key, column]
        scores = scores * scale
        scores = scores.masked_fill(~allowed.to(q.device)[None], float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # an empty range: all -inf
        out[rows] = torch.einsum("htk,khd->thd", weights, v[lo:hi].float()).to(q.dtype)
    return out
