"""Triton flash attention with DeBERTa's c2p / p2c terms or T5's bias. Imported lazily.

One program per (query tile, sequence, head). Each key tile adds to ``q @ k^T`` the c2p
entries ``c2p[h, i, idx(i - j)]`` and p2c entries ``p2c[h, j, idx(i - j)]``, gathered from the
precomputed ``[H, T, 2 * span]`` projections, or a per-head scalar ``bias[h, idx(i - j)]``
(T5's bucketed relative position bias), then updates an online softmax in fp32: the
``[L, L]`` scores never reach global memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import triton
import triton.language as tl

from ._dispatch import next_power_of_2

if TYPE_CHECKING:
    from .deberta_attention import AttentionInputs
    from .rows_attention import RowsInputs

LOG2E = 1.4426950408889634
NUM_STAGES = 2  # software pipelining of both kernels' key loops (benchmarks sweep it)


@triton.jit
def _load_tile(base, rows, stride_t, offs_d, row_valid, d_valid):
    """``[rows, BLOCK_D]`` of one head of a packed ``[T, H, D]`` tensor (``base`` points at
    the head); masked rows and columns read 0."""
    return tl.load(
        base + rows[:, None] * stride_t + offs_d[None, :],
        mask=row_valid[:, None] & d_valid[None, :],
        other=0.0,
    )


@triton.jit
def _attend_keys(
    q,
    m_i,
    l_i,
    acc,
    k_base,
    v_base,
    c2p_base,
    p2c_base,
    bias_base,
    idx_ptr,
    rows,
    keys,
    distance,
    pair,
    mask,
    n_valid,
    offs_d,
    d_valid,
    stride_kt,
    stride_vt,
    stride_ct,
    stride_pt,
    idx_offset,
    qk_scale,
    HAS_C2P: tl.constexpr,
    HAS_P2C: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    IEEE: tl.constexpr,
):
    """One key tile of the online softmax: ``q @ k^T`` plus the c2p / p2c entries or the bias
    of each pair's relative bucket (``distance`` = query row - key row, read where ``pair``),
    scores outside ``mask`` at -inf; returns the updated ``(acc, m_i, l_i)``. ``*_base`` point
    at the head; a row without a key in this tile yet keeps ``m_i`` at -inf and adds nothing."""
    k = _load_tile(k_base, keys, stride_kt, offs_d, n_valid, d_valid)
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    if HAS_C2P or HAS_P2C or HAS_BIAS:
        rel = tl.load(idx_ptr + (distance + idx_offset), mask=pair, other=0)
        if HAS_BIAS:
            s += tl.load(bias_base + rel, mask=pair, other=0.0).to(tl.float32)
        if HAS_C2P:
            s += tl.load(c2p_base + rows[:, None] * stride_ct + rel, mask=pair, other=0.0).to(
                tl.float32
            )
        if HAS_P2C:
            s += tl.load(p2c_base + keys[None, :] * stride_pt + rel, mask=pair, other=0.0).to(
                tl.float32
            )
    s = tl.where(mask, s * qk_scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # exp2(-inf - -inf) is NaN
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    v = _load_tile(v_base, keys, stride_vt, offs_d, n_valid, d_valid)
    if IEEE:
        pv = tl.dot(p, v.to(tl.float32), input_precision="ieee")
    else:
        pv = tl.dot(p.to(v.dtype), v)
    return acc * alpha[:, None] + pv, m_new, l_i


@triton.jit
def _store_rows(o_base, rows, stride_ot, offs_d, acc, l_i, m_valid, d_valid):
    """The normalised output of the tile's rows (``o_base`` points at the head); a row that
    saw no key (past the batch) writes nothing."""
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(
        o_base + rows[:, None] * stride_ot + offs_d[None, :],
        out.to(o_base.dtype.element_ty),
        mask=m_valid[:, None] & d_valid[None, :],
    )


@triton.jit
def _deberta_attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    c2p_ptr,
    p2c_ptr,
    bias_ptr,
    idx_ptr,
    cu_ptr,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_ot,
    stride_oh,
    stride_ch,
    stride_ct,
    stride_ph,
    stride_pt,
    stride_bh,
    idx_offset,
    qk_scale,  # 1 / sqrt(D * factor) * log2(e): softmax in base 2
    head_dim,
    HAS_C2P: tl.constexpr,
    HAS_P2C: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    tile = tl.program_id(0)
    seq = tl.program_id(1)
    head = tl.program_id(2).to(tl.int64)
    start = tl.load(cu_ptr + seq).to(tl.int64)
    length = (tl.load(cu_ptr + seq + 1) - tl.load(cu_ptr + seq)).to(tl.int32)
    if tile * BLOCK_M >= length:
        return  # grid is sized for the longest sequence

    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < length
    d_valid = offs_d < head_dim
    rows = start + offs_m
    q = _load_tile(q_ptr + head * stride_qh, rows, stride_qt, offs_d, m_valid, d_valid)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    for n0 in range(0, length, BLOCK_N):
        cols = n0 + offs_n
        n_valid = cols < length
        acc, m_i, l_i = _attend_keys(
            q, m_i, l_i, acc, k_ptr + head * stride_kh, v_ptr + head * stride_vh,
            c2p_ptr + head * stride_ch, p2c_ptr + head * stride_ph, bias_ptr + head * stride_bh,
            idx_ptr,
            rows, start + cols, offs_m[:, None] - cols[None, :],
            m_valid[:, None] & n_valid[None, :], n_valid[None, :], n_valid, offs_d, d_valid,
            stride_kt, stride_vt, stride_ct, stride_pt, idx_offset, qk_scale,
            HAS_C2P, HAS_P2C, HAS_BIAS, IEEE,
        )  # fmt: skip

    _store_rows(o_ptr + head * stride_oh, rows, stride_ot, offs_d, acc, l_i, m_valid, d_valid)


def _block_sizes(head_dim: int, max_seqlen: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_D, num_warps); tl.dot needs every dim >= 16."""
    block_d = max(16, next_power_of_2(head_dim))
    block_n = 64 if block_d <= 64 else 32
    block_m = 64 if max_seqlen > 64 else max(16, next_power_of_2(max_seqlen))
    return block_m, block_n, block_d, 4


def _last_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _bucket_table(rel_index: torch.Tensor | None, q: torch.Tensor, unused: torch.Tensor):
    """The bucket table as the kernels read it (int32 on q's device) and the offset of distance
    0 in it; without relative terms ``unused`` (a dummy, never read) and 0."""
    if rel_index is None:
        return unused, 0
    idx = rel_index.to(device=q.device, dtype=torch.int32).contiguous()
    return idx, (idx.numel() + 1) // 2 - 1


def _launch(
    kernel, terms: tuple, layout: list, offsets: list, sm_scale: float, grid: tuple, max_seqlen: int
) -> None:
    """Launch one of the kernels. ``terms`` are q / k / v / out / c2p / p2c / bias (None where a
    term is off: a dummy takes its place, never read); the kernel takes their pointers, then
    ``layout`` (the bucket table and the sequence bounds), their head and token strides (the
    bias: its head stride), ``offsets``, the base-2 scale and the head size. ``grid[0]`` is
    the number of rows the BLOCK_M tiles cover; the kernels read last dimensions
    contiguously."""
    q, k, v, out, c2p, p2c, bias = terms
    q, k, v = (_last_contiguous(t) for t in (q, k, v))
    c2p_t, p2c_t, bias_t = (q if t is None else _last_contiguous(t) for t in (c2p, p2c, bias))
    strides = [
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1),
        c2p_t.stride(0) if c2p is not None else 0, c2p_t.stride(1) if c2p is not None else 0,
        p2c_t.stride(0) if p2c is not None else 0, p2c_t.stride(1) if p2c is not None else 0,
        bias_t.stride(0) if bias is not None else 0,
    ]  # fmt: skip
    flags = {"HAS_C2P": c2p is not None, "HAS_P2C": p2c is not None,
             "HAS_BIAS": bias is not None, "IEEE": q.dtype == torch.float32}  # fmt: skip
    head_dim = q.shape[-1]
    block_m, block_n, block_d, warps = _block_sizes(head_dim, max_seqlen)
    kernel[(triton.cdiv(grid[0], block_m), *grid[1:])](
        q, k, v, out, c2p_t, p2c_t, bias_t, *layout, *strides, *offsets, sm_scale * LOG2E,
        head_dim, **flags,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, num_warps=warps, num_stages=NUM_STAGES,
    )  # fmt: skip


def deberta_attention_triton(x: AttentionInputs, out: torch.Tensor) -> torch.Tensor:
    """Arguments already validated by ``flash_deberta_attention``; writes ``[T, H, D]`` into
    ``out`` (its last dimension contiguous) and returns it."""
    q, k, v, cu_seqlens, max_seqlen, c2p, p2c, rel_index, sm_scale = x
    batch = cu_seqlens.numel() - 1
    if batch == 0 or max_seqlen == 0:
        return out
    cu = cu_seqlens.to(device=q.device, dtype=torch.int32).contiguous()
    idx, idx_offset = _bucket_table(rel_index, q, cu)
    terms = (q, k, v, out, c2p, p2c, None)
    grid = (max_seqlen, batch, q.shape[1])
    _launch(_deberta_attention_kernel, terms, [idx, cu], [idx_offset], sm_scale, grid, max_seqlen)
    return out


@triton.jit
def _deberta_attention_rows_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    c2p_ptr,
    p2c_ptr,
    bias_ptr,
    idx_ptr,
    start_ptr,
    end_ptr,
    total,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_ot,
    stride_oh,
    stride_ch,
    stride_ct,
    stride_ph,
    stride_pt,
    stride_bh,
    idx_offset,
    max_distance,
    qk_scale,  # 1 / sqrt(D * factor) * log2(e): softmax in base 2
    head_dim,
    HAS_C2P: tl.constexpr,
    HAS_P2C: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """One program per (tile of BLOCK_M consecutive rows of the packed batch, head). Row i
    attends to keys ``start[i] <= j < end[i]`` (its sequence); a tile may straddle sequences,
    so its key loop covers the union of its rows' ranges. No per-sequence host data: the grid
    depends on the token count alone (CUDA-graph safe)."""
    tile = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < total
    d_valid = offs_d < head_dim
    rows = offs_m.to(tl.int64)
    row_start = tl.load(start_ptr + offs_m, mask=m_valid, other=0)
    row_end = tl.load(end_ptr + offs_m, mask=m_valid, other=0)
    lo = tl.min(tl.where(m_valid, row_start, total), axis=0)
    hi = tl.max(tl.where(m_valid, row_end, 0), axis=0)
    q = _load_tile(q_ptr + head * stride_qh, rows, stride_qt, offs_d, m_valid, d_valid)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    for n0 in range(lo, hi, BLOCK_N):
        cols = n0 + offs_n
        n_valid = cols < hi
        pair = (
            m_valid[:, None]
            & (cols[None, :] >= row_start[:, None])
            & (cols[None, :] < row_end[:, None])
        )
        # only rows of no sequence (a dummy run's stale positions) reach past the table
        distance = offs_m[:, None] - cols[None, :]
        distance = tl.minimum(tl.maximum(distance, -max_distance), max_distance)
        acc, m_i, l_i = _attend_keys(
            q, m_i, l_i, acc, k_ptr + head * stride_kh, v_ptr + head * stride_vh,
            c2p_ptr + head * stride_ch, p2c_ptr + head * stride_ph, bias_ptr + head * stride_bh,
            idx_ptr,
            rows, cols.to(tl.int64), distance, pair, pair, n_valid, offs_d, d_valid,
            stride_kt, stride_vt, stride_ct, stride_pt, idx_offset, qk_scale,
            HAS_C2P, HAS_P2C, HAS_BIAS, IEEE,
        )  # fmt: skip

    _store_rows(o_ptr + head * stride_oh, rows, stride_ot, offs_d, acc, l_i, m_valid, d_valid)


def deberta_attention_rows_triton(
    x: RowsInputs,
    *,
    out: torch.Tensor,
    c2p: torch.Tensor | None = None,
    p2c: torch.Tensor | None = None,
    rel_index: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of every row of packed ``[T, H, D]`` q/k/v over the keys
    ``row_start[i] <= j < row_end[i]`` (integer ``[T]``, on the device), into ``out`` (its
    last dimension contiguous); the launch needs no host value but ``T``. ``max_seqlen``
    bounds the sequence lengths (block sizes only). ``bias`` ``[H, buckets]`` (with
    ``rel_index``, no c2p / p2c): ``bias[h, rel_index[i - j + span - 1]]`` added to each score
    before the scale."""
    q, k, v, row_start, row_end, max_seqlen, sm_scale = x
    total, heads = q.shape[:2]
    if total == 0:
        return out
    start, end = (t.to(torch.int32).contiguous() for t in (row_start, row_end))
    idx, idx_offset = _bucket_table(rel_index, q, start)
    layout = [idx, start, end, total]
    terms = (q, k, v, out, c2p, p2c, bias)
    # the distances clamp at the table's reach: only rows of no sequence go past it
    offsets = [idx_offset, idx_offset]
    grid = (total, heads)
    _launch(_deberta_attention_rows_kernel, terms, layout, offsets, sm_scale, grid, max_seqlen)
    return out
