"""One bidirectional LSTM layer over a padded batch of sequences of different lengths.

What ``nn.LSTM(bidirectional=True)`` computes on a packed batch (``pack_padded_sequence``), in
one Triton launch for the whole recurrence. cuDNN runs a recurrence as two kernels per time step
and direction, hundreds of launches for a step of long texts, which cost the engine's only CPU
thread more than the GPU work itself, whatever the batch. The kernel keeps
``h`` and ``c`` of a block of sequences on one SM and loops over time itself; with
``per_step=True`` it is one launch per time step instead, the hidden units spread over the grid
(each SM reads only its units' rows of ``W_hh``), for a CUDA graph to replay.

Inputs: ``gates_x`` ``[B, T, 2, 4H]`` = ``x @ W_ih^T + b_ih + b_hh`` per direction (one GEMM
the caller runs), ``w_hh`` ``[2, 4H, H]`` (gate order i, f, g, o, as torch), ``lengths`` ``[B]``.
Output ``[B, T, 2H]``: forward direction in ``[..., :H]``, backward in ``[..., H:]``; rows past a
sequence's length are zero, as ``pad_packed_sequence`` leaves them.
"""

from __future__ import annotations

import torch

from ._dispatch import select_backend


def _check_lstm_args(gates_x: torch.Tensor, w_hh: torch.Tensor, lengths: torch.Tensor) -> None:
    if gates_x.dim() != 4 or gates_x.shape[2] != 2:
        raise ValueError(f"gates_x must be [B, T, 2, 4H], got {tuple(gates_x.shape)}")
    hidden = gates_x.shape[3] // 4
    if gates_x.shape[3] != 4 * hidden or tuple(w_hh.shape) != (2, 4 * hidden, hidden):
        raise ValueError(
            f"w_hh must be [2, 4H, H] for gates_x {tuple(gates_x.shape)}, got {tuple(w_hh.shape)}"
        )
    if lengths.dim() != 1 or lengths.shape[0] != gates_x.shape[0]:
        raise ValueError(f"lengths must be [B={gates_x.shape[0]}], got {tuple(lengths.shape)}")
    if lengths.is_floating_point():
        raise ValueError(f"lengths must be integers, got {lengths.dtype}")


def _lstm_torch(gates_x: torch.Tensor, w_hh: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The same recurrence with torch ops, one time step at a time (fp32 state, like the
    kernel); the reference the kernel is tested against."""
    batch, steps, _, four_h = gates_x.shape
    hidden = four_h // 4
    out = gates_x.new_zeros(batch, steps, 2 * hidden)
    lengths = lengths.to(gates_x.device, torch.long)
    time = torch.arange(steps, device=gates_x.device)
    rows = torch.arange(batch, device=gates_x.device)
    for direction in range(2):
        h = gates_x.new_zeros(batch, hidden, dtype=torch.float32)
        c = torch.zeros_like(h)
        weight = w_hh[direction].float()
        for step in range(steps):
            active = step < lengths
            pos = time[step] if direction == 0 else (lengths - 1 - step).clamp(min=0)
            pos = pos.expand(batch)
            gates = gates_x[rows, pos, direction].float() + (h.to(w_hh.dtype).float() @ weight.T)
            i, f, g, o = gates.chunk(4, dim=-1)
            c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h_new = torch.sigmoid(o) * torch.tanh(c_new)
            keep = active.unsqueeze(1)
            c, h = torch.where(keep, c_new, c), torch.where(keep, h_new, h)
            columns = slice(direction * hidden, (direction + 1) * hidden)
            out[rows[active], pos[active], columns] = h_new[active].to(out.dtype)
    return out


def bidirectional_lstm(
    gates_x: torch.Tensor,
    w_hh: torch.Tensor,
    lengths: torch.Tensor,
    *,
    backend: str = "auto",
    per_step: bool = False,
) -> torch.Tensor:
    """``[B, T, 2H]`` outputs of one bidirectional LSTM layer (see the module's doc).

    ``lengths`` (any integer dtype, on the inputs' device) must be >= 1 and <= T. Hidden state
    and cell are kept in float32; the recurrent product runs in ``w_hh``'s dtype with float32
    accumulation (IEEE float32 for float32 weights, never TF32). ``per_step``: the Triton
    backend launches one kernel per time step (both directions, the hidden units spread over
    many SMs) instead of one for the whole recurrence; for capture in a CUDA graph."""
    _check_lstm_args(gates_x, w_hh, lengths)
    if select_backend(backend, gates_x, w_hh, lengths, kernel="bidirectional_lstm") == "triton":
        from ._triton_lstm import lstm_triton, lstm_triton_steps

        return (lstm_triton_steps if per_step else lstm_triton)(gates_x, w_hh, lengths)
    return _lstm_torch(gates_x, w_hh, lengths)
