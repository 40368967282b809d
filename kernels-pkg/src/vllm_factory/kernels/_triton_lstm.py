"""Triton bidirectional LSTM layer. Imported lazily, only once the Triton backend was selected.

Grid: (blocks of ``BLOCK_B`` sequences, 2 directions). A program loops over the time steps
itself: at step s, each of its sequences reads ``h`` (float32, ping-pong buffers in global
memory, so a step never reads what it writes), multiplies it by ``W_hh`` a chunk of
``BLOCK_H`` hidden units at a time (the four gates of those units; for float32 weights also
``K_CHUNK`` columns of ``h`` at a time), updates ``c`` and ``h`` of those units and writes the
output row. A sequence's backward direction starts at its own last
word, and a step past its length changes nothing, so no padding ever enters the state.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._dispatch import next_power_of_2


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _tanh(x):
    # 1 - 2 / (exp(2x) + 1) needs no libdevice (runs under TRITON_INTERPRET); clamped so that
    # exp stays finite (tanh(15) is 1.0 in float32).
    x = tl.minimum(tl.maximum(x, -15.0), 15.0)
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


@triton.jit
def _gate(h_in, w_base, gate: tl.constexpr, hidden, units, ks, w_mask, IEEE: tl.constexpr):
    """``h_in @ W_hh[gate * H + units, :]^T``: [BLOCK_B, BLOCK_H] in float32."""
    w = tl.load(
        w_base + (gate * hidden + units[None, :]) * hidden + ks[:, None], mask=w_mask, other=0.0
    )
    if IEEE:
        return tl.dot(h_in, w, input_precision="ieee")
    return tl.dot(h_in, w)


@triton.jit
def _gates_by_chunks(
    read, rows, row_ok, whh_ptr, w_base, hidden, units, u_ok,
    BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, K_CHUNK: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    """The four gates' ``h @ W_hh^T`` of ``units`` ([BLOCK_B, BLOCK_H] each, float32), ``h``
    (rows of ``read``) and ``W_hh`` taken ``K_CHUNK`` columns / rows at a time."""
    gi = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)
    gf = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)
    gg = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)
    go = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)
    for k0 in range(0, hidden, K_CHUNK):
        kc = k0 + tl.arange(0, K_CHUNK)
        kc_ok = kc < hidden
        h_c = tl.load(
            read + rows[:, None] * hidden + kc[None, :],
            mask=row_ok[:, None] & kc_ok[None, :], other=0.0,
        ).to(whh_ptr.dtype.element_ty)  # fmt: skip
        w_mask = kc_ok[:, None] & u_ok[None, :]
        gi += _gate(h_c, w_base, 0, hidden, units, kc, w_mask, IEEE)
        gf += _gate(h_c, w_base, 1, hidden, units, kc, w_mask, IEEE)
        gg += _gate(h_c, w_base, 2, hidden, units, kc, w_mask, IEEE)
        go += _gate(h_c, w_base, 3, hidden, units, kc, w_mask, IEEE)
    return gi, gf, gg, go


@triton.jit
def _cell_step(gi, gf, gg, go, gx_rows, c_rows, h_rows, out_rows, units, hidden, m):
    """Adds the input projections (``gx_rows``) to the gates of ``units``, updates their cell
    (``c_rows``, float32, in place) and writes their new ``h`` (float32, ``h_rows``) and output
    (``out_rows``) where ``m``; each ``*_rows`` a [BLOCK_B, 1] block of row pointers."""
    gi += tl.load(gx_rows + units[None, :], mask=m, other=0.0).to(tl.float32)
    gf += tl.load(gx_rows + hidden + units[None, :], mask=m, other=0.0).to(tl.float32)
    gg += tl.load(gx_rows + 2 * hidden + units[None, :], mask=m, other=0.0).to(tl.float32)
    go += tl.load(gx_rows + 3 * hidden + units[None, :], mask=m, other=0.0).to(tl.float32)
    c_old = tl.load(c_rows + units[None, :], mask=m, other=0.0)
    c_new = _sigmoid(gf) * c_old + _sigmoid(gi) * _tanh(gg)
    h_new = _sigmoid(go) * _tanh(c_new)
    tl.store(c_rows + units[None, :], c_new, mask=m)
    tl.store(h_rows + units[None, :], h_new, mask=m)
    tl.store(out_rows + units[None, :], h_new.to(out_rows.dtype.element_ty), mask=m)


# Triton compiles a variant per value class of each integer argument (== 1, divisible by 16,
# other): batch, steps and the per-sequence strides change with every step's texts, and each new
# class cost a served step a compile.
@triton.jit(do_not_specialize=["batch", "steps", "stride_gb", "stride_ob"])
def _bilstm_kernel(
    gx_ptr, whh_ptr, len_ptr, out_ptr, h_ptr, c_ptr,
    batch, steps, hidden,
    stride_gb, stride_gt, stride_gd,
    stride_ob, stride_ot,
    BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, K_CHUNK: tl.constexpr,
    IEEE: tl.constexpr,
):  # fmt: skip
    block = tl.program_id(0)
    direction = tl.program_id(1)
    rows = block * BLOCK_B + tl.arange(0, BLOCK_B)
    row_ok = rows < batch
    length = tl.load(len_ptr + rows, mask=row_ok, other=0).to(tl.int32)
    ks = tl.arange(0, BLOCK_K)
    k_ok = ks < hidden
    w_base = whh_ptr + direction * 4 * hidden * hidden
    c_rows = c_ptr + (direction * batch + rows[:, None]) * hidden
    for step in range(steps):
        active = row_ok & (step < length)
        pos = tl.where(direction == 0, step, length - 1 - step)
        read = h_ptr + ((step % 2) * 2 + direction) * batch * hidden
        write = h_ptr + (((step + 1) % 2) * 2 + direction) * batch * hidden
        if K_CHUNK == BLOCK_K:  # the whole h row block at once (16-bit weights)
            h_prev = tl.load(
                read + rows[:, None] * hidden + ks[None, :],
                mask=row_ok[:, None] & k_ok[None, :], other=0.0,
            )  # fmt: skip
            h_in = h_prev.to(whh_ptr.dtype.element_ty)
        gx_rows = gx_ptr + rows[:, None] * stride_gb + pos[:, None] * stride_gt
        gx_rows += direction * stride_gd
        out_rows = out_ptr + rows[:, None] * stride_ob + pos[:, None] * stride_ot
        out_rows += direction * hidden
        for start in range(0, hidden, BLOCK_H):
            units = start + tl.arange(0, BLOCK_H)
            u_ok = units < hidden
            m = active[:, None] & u_ok[None, :]
            if K_CHUNK == BLOCK_K:
                w_mask = k_ok[:, None] & u_ok[None, :]
                gi = _gate(h_in, w_base, 0, hidden, units, ks, w_mask, IEEE)
                gf = _gate(h_in, w_base, 1, hidden, units, ks, w_mask, IEEE)
                gg = _gate(h_in, w_base, 2, hidden, units, ks, w_mask, IEEE)
                go = _gate(h_in, w_base, 3, hidden, units, ks, w_mask, IEEE)
            else:  # K_CHUNK columns of h and rows of W_hh at a time: few registers (float32)
                gi, gf, gg, go = _gates_by_chunks(
                    read, rows, row_ok, whh_ptr, w_base, hidden, units, u_ok,
                    BLOCK_B, BLOCK_H, K_CHUNK, IEEE,
                )  # fmt: skip
            h_rows = write + rows[:, None] * hidden
            _cell_step(gi, gf, gg, go, gx_rows, c_rows, h_rows, out_rows, units, hidden, m)
        tl.debug_barrier()  # this step's h is complete before the next step reads it


def _buffers(
    gates_x: torch.Tensor, w_hh: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The zeroed output ``[B, T, 2H]``, ``gates_x`` and ``w_hh`` with unit inner strides, and
    the float32 state: ``h`` as two ping-pong buffers per direction, ``c`` per direction."""
    batch, steps, _, four_h = gates_x.shape
    hidden = four_h // 4
    out = torch.zeros(batch, steps, 2 * hidden, dtype=gates_x.dtype, device=gates_x.device)
    if gates_x.stride(-1) != 1:
        gates_x = gates_x.contiguous()
    state = torch.zeros(3 * 2 * batch * hidden, dtype=torch.float32, device=gates_x.device)
    h_buffers, cells = state[: 4 * batch * hidden], state[4 * batch * hidden :]
    return out, gates_x, w_hh.contiguous(), h_buffers, cells


def lstm_triton(gates_x: torch.Tensor, w_hh: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Triton implementation of ``bidirectional_lstm`` (arguments already validated)."""
    batch, steps, _, four_h = gates_x.shape
    hidden = four_h // 4
    out, gates_x, w_hh, h_buffers, cells = _buffers(gates_x, w_hh)
    if batch == 0 or steps == 0:
        return out
    block_k = max(16, next_power_of_2(hidden))
    size = w_hh.element_size()
    if size < 4:
        # 16-bit weights: the whole h row block against the four gates' W_hh tiles
        # [BLOCK_K, BLOCK_H] of a chunk of units, through shared memory (228 KiB on an
        # H100/H200): 32 units a chunk up to H = 256, one pipeline stage when two do not fit.
        k_chunk = block_k
        block_h = 32 if block_k * size <= 512 else 16
    else:
        # float32 weights (vLLM's default head dtype): IEEE dots run on FMA units and keep
        # their operands in registers; whole-row tiles spilled heavily, so h and W_hh come 32
        # columns / rows at a time.
        k_chunk = min(block_k, 32)
        block_h = 32
    tiles = 4 * k_chunk * block_h * size
    block_b = 16
    grid = (triton.cdiv(batch, block_b), 2)
    _bilstm_kernel[grid](
        gates_x, w_hh, lengths, out, h_buffers, cells,
        batch, steps, hidden,
        gates_x.stride(0), gates_x.stride(1), gates_x.stride(2),
        out.stride(0), out.stride(1),
        BLOCK_B=block_b, BLOCK_H=block_h, BLOCK_K=block_k, K_CHUNK=k_chunk,
        IEEE=w_hh.dtype == torch.float32, num_warps=4,
        num_stages=2 if 2 * tiles <= 160 * 1024 else 1,
    )  # fmt: skip
    return out


# One time step of both directions per launch (the time loop is the caller's): the hidden units
# are spread over the grid, so W_hh is read by many SMs at once instead of one, and a recurrence
# is T launches that a CUDA graph replays. ``step`` changes with every launch: not specialised.
@triton.jit(do_not_specialize=["step", "batch", "stride_gb", "stride_ob"])
def _bilstm_step_kernel(
    gx_ptr, whh_ptr, len_ptr, out_ptr, h_ptr, c_ptr,
    step, batch, hidden,
    stride_gb, stride_gt, stride_gd,
    stride_ob, stride_ot,
    BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, K_CHUNK: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    units = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)
    direction = tl.program_id(1)
    rows = tl.program_id(2) * BLOCK_B + tl.arange(0, BLOCK_B)
    row_ok = rows < batch
    u_ok = units < hidden
    length = tl.load(len_ptr + rows, mask=row_ok, other=0).to(tl.int32)
    active = row_ok & (step < length)
    pos = tl.where(direction == 0, step, length - 1 - step)
    # h ping-pongs between two buffers: this step reads the units every program writes
    read = h_ptr + ((step % 2) * 2 + direction) * batch * hidden
    write = h_ptr + (((step + 1) % 2) * 2 + direction) * batch * hidden
    w_base = whh_ptr + direction * 4 * hidden * hidden
    gi, gf, gg, go = _gates_by_chunks(
        read, rows, row_ok, whh_ptr, w_base, hidden, units, u_ok, BLOCK_B, BLOCK_H, K_CHUNK, IEEE
    )
    m = active[:, None] & u_ok[None, :]
    gx_rows = gx_ptr + rows[:, None] * stride_gb + pos[:, None] * stride_gt + direction * stride_gd
    c_rows = c_ptr + (direction * batch + rows[:, None]) * hidden
    out_rows = out_ptr + rows[:, None] * stride_ob + pos[:, None] * stride_ot + direction * hidden
    h_rows = write + rows[:, None] * hidden
    _cell_step(gi, gf, gg, go, gx_rows, c_rows, h_rows, out_rows, units, hidden, m)


def lstm_triton_steps(
    gates_x: torch.Tensor,
    w_hh: torch.Tensor,
    lengths: torch.Tensor,
    *,
    block_h: int | None = None,
    k_chunk: int | None = None,
    num_warps: int = 4,
) -> torch.Tensor:
    """``bidirectional_lstm`` as one launch of :func:`_bilstm_step_kernel` per time step, both
    directions in each (arguments already validated). Meant for capture in a CUDA graph: eager,
    its T launches cost the CPU what cuDNN's 4T do. ``block_h`` / ``k_chunk`` / ``num_warps``:
    the tile (powers of two, at least 16), for ``benchmarks/bench_bilstm.py``'s sweep; by
    default 32 units and 128 columns a chunk for 16-bit weights, 16 and 64 for float32."""
    batch, steps, _, four_h = gates_x.shape
    hidden = four_h // 4
    out, gates_x, w_hh, h_buffers, cells = _buffers(gates_x, w_hh)
    if batch == 0 or steps == 0:
        return out
    # 16-bit weights: 32 units a program (H = 384: 12 programs a direction), h and W_hh 128
    # columns at a time, the fastest of the sweeps at every batch
    # (docs/benchmarks/h200/2026-12-02-56cc5e3-kernels-bilstm.txt,
    # docs/benchmarks/h200/2026-12-02-f66199b-kernels-bilstm.txt). float32 weights: 16 units x
    # 64 columns (registers).
    block_b = 16
    wide = w_hh.dtype != torch.float32
    if block_h is None:
        block_h = 32 if wide else 16
    if k_chunk is None:
        k_chunk = 128 if wide else 64
    k_chunk = min(k_chunk, max(16, next_power_of_2(hidden)))
    grid = (triton.cdiv(hidden, block_h), 2, triton.cdiv(batch, block_b))
    for step in range(steps):
        _bilstm_step_kernel[grid](
            gates_x, w_hh, lengths, out, h_buffers, cells,
            step, batch, hidden,
            gates_x.stride(0), gates_x.stride(1), gates_x.stride(2),
            out.stride(0), out.stride(1),
            BLOCK_B=block_b, BLOCK_H=block_h, K_CHUNK=k_chunk,
            IEEE=w_hh.dtype == torch.float32, num_warps=num_warps,
        )  # fmt: skip
    return out
