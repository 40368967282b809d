"""Bidirectional LSTM layer: the PyTorch fallback vs torch's packed ``nn.LSTM`` (CPU)."""

from __future__ import annotations

import pytest
import torch
from kernels_reference import close, lstm_case, lstm_inputs, ref_lstm, unspecialised
from vllm_factory.kernels import bidirectional_lstm

CASES = [([1], 32, 32), ([9, 7, 7, 3, 1], 48, 32), ([5, 5], 40, 24), ([12, 2, 1], 64, 64)]


@pytest.mark.parametrize(("lengths", "width", "hidden"), CASES)
@torch.no_grad()
def test_fallback_matches_packed_nn_lstm(lengths: list[int], width: int, hidden: int):
    lstm, x, lens = lstm_case(lengths, width, hidden, seed=len(lengths))
    gates, w_hh = lstm_inputs(lstm, x)
    out = bidirectional_lstm(gates, w_hh, lens, backend="torch")
    assert out.shape == (len(lengths), max(lengths), 2 * hidden)
    close(out, ref_lstm(lstm, x, lens))
    for row, length in enumerate(lengths):  # nothing past a sequence's end
        assert not out[row, length:].any()


@torch.no_grad()
def test_order_of_lengths_does_not_matter():
    """Unlike ``pack_padded_sequence``, the layer takes lengths in any order."""
    lstm, x, lens = lstm_case([6, 2, 4], 32, 32)
    gates, w_hh = lstm_inputs(lstm, x)
    sorted_out = bidirectional_lstm(gates, w_hh, lens, backend="torch")
    order = torch.tensor([1, 2, 0])
    shuffled = bidirectional_lstm(gates[order], w_hh, lens[order], backend="torch")
    close(shuffled, sorted_out[order])


def test_rejects_bad_args():
    gates, w_hh, lens = torch.zeros(2, 3, 2, 16), torch.zeros(2, 16, 4), torch.tensor([3, 1])
    with pytest.raises(ValueError, match="gates_x"):
        bidirectional_lstm(gates[:, :, :1], w_hh, lens)
    with pytest.raises(ValueError, match="w_hh"):
        bidirectional_lstm(gates, w_hh[:, :, :3], lens)
    with pytest.raises(ValueError, match="lengths"):
        bidirectional_lstm(gates, w_hh, lens[:1])
    with pytest.raises(ValueError, match="integers"):
        bidirectional_lstm(gates, w_hh, lens.float())


def test_per_step_arguments_compile_no_variants() -> None:
    # The batch, the words and the per-sequence strides change with every served step, and the
    # per-step kernel's ``step`` with every launch: a Triton variant per value class of each
    # (== 1, divisible by 16, other) would be compiled inside the engine.
    for kernel, names in (
        ("_bilstm_kernel", {"batch", "steps", "stride_gb", "stride_ob"}),
        ("_bilstm_step_kernel", {"step", "batch", "stride_gb", "stride_ob"}),
    ):
        assert names <= unspecialised("_triton_lstm", kernel)
