"""Plain, deliberately naive PyTorch references shared by the kernel tests (fp32 only), and
their one look at a Triton kernel's compile-time specialisation."""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Iterable

import pytest
import torch


def ref_rope(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, head_dim: int, base: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate-half RoPE from first principles, one angle per (position, frequency) pair."""
    half = head_dim // 2
    # Angles in fp32 on purpose: that is HF's (and the checkpoints') convention; in fp64 the
    # angle of position ~500 already moves by ~3e-5 rad, more than the 1e-5 tolerance.
    exponent = torch.tensor([2 * i / head_dim for i in range(half)], dtype=torch.float32)
    inv_freq = 1.0 / (base**exponent)
    angles = (positions.float()[:, None] * inv_freq[None, :]).double()  # [T, half]
    cos = torch.cat((angles.cos(), angles.cos()), dim=-1)[:, None, :]  # [T, 1, D]
    sin = torch.cat((angles.sin(), angles.sin()), dim=-1)[:, None, :]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return (x * cos + rotated * sin).to(torch.float32)

    return rotate(q), rotate(k)


def ref_gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
    x = x.double()
    if approximate == "tanh":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def ref_geglu(x: torch.Tensor, approximate: str) -> torch.Tensor:
    inter = x.shape[-1] // 2
    return (ref_gelu(x[..., :inter], approximate) * x[..., inter:].double()).to(x.dtype)


def ref_layernorm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float
) -> torch.Tensor:
    xd = x.double()
    mean = xd.mean(dim=-1, keepdim=True)
    var = ((xd - mean) ** 2).mean(dim=-1, keepdim=True)
    y = (xd - mean) / torch.sqrt(var + eps) * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y.to(x.dtype)


def close(actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-5) -> None:
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def lstm_case(
    lengths: list[int], width: int, hidden: int, seed: int = 0, layers: int = 1
) -> tuple[torch.nn.LSTM, torch.Tensor, torch.Tensor]:
    """A bidirectional ``nn.LSTM`` and a padded batch ``[B, T, width]`` (lengths longest first)."""
    torch.manual_seed(seed)
    lstm = torch.nn.LSTM(width, hidden, num_layers=layers, bidirectional=True, batch_first=True)
    x = torch.randn(len(lengths), max(lengths), width)
    return lstm.eval(), x, torch.tensor(lengths)


def lstm_inputs(lstm: torch.nn.LSTM, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``bidirectional_lstm``'s inputs for layer 0 of ``lstm``: gates_x [B, T, 2, 4H], w_hh."""
    w_ih = torch.stack([lstm.weight_ih_l0, lstm.weight_ih_l0_reverse])
    bias = torch.stack(
        [lstm.bias_ih_l0 + lstm.bias_hh_l0, lstm.bias_ih_l0_reverse + lstm.bias_hh_l0_reverse]
    )
    gates = torch.einsum("bti,dgi->btdg", x, w_ih.to(x.dtype)) + bias.to(x.dtype)
    return gates, torch.stack([lstm.weight_hh_l0, lstm.weight_hh_l0_reverse]).to(x.dtype)


def ref_lstm(lstm: torch.nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """torch's own packed bidirectional LSTM, padded back (zeros past each length)."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    packed = lstm(pack_padded_sequence(x, lengths, batch_first=True))[0]
    return pad_packed_sequence(packed, batch_first=True, total_length=x.shape[1])[0]


def unspecialised(module: str, kernel: str) -> set[str]:
    """Names of the arguments ``vllm_factory.kernels.<module>.<kernel>`` is not specialised on
    (``do_not_specialize``); skips where Triton is absent or interpreted (the interpreter's
    functions carry no specialisation)."""
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter's functions carry no specialisation")
    jitted = getattr(importlib.import_module(f"vllm_factory.kernels.{module}"), kernel)
    return {p.name for p in jitted.params if p.do_not_specialize}


# The Triton wrappers of the element-wise kernels, as ``spy_calls`` takes them.
ELEMENTWISE_WRAPPERS = (
    "_triton_rope.rope_triton",
    "_triton_geglu.geglu_triton",
    "_triton_layernorm.layernorm_triton",
)


def spy_calls(monkeypatch: pytest.MonkeyPatch, targets: Iterable[str]) -> list[str]:
    """The names of ``targets`` (``"<module of vllm_factory.kernels>.<function>"``) in the
    order they are called from now on (each still runs): proof that a kernel path ran."""
    calls: list[str] = []
    for target in targets:
        module_name, name = target.split(".")
        module = importlib.import_module(f"vllm_factory.kernels.{module_name}")
        original = getattr(module, name)

        def wrapper(*args, _orig=original, _name=name, **kwargs):
            calls.append(_name)
            return _orig(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)
    return calls
