"""``span_logits``'s PyTorch fallback and argument checks (CPU; the Triton kernel against the
same reference runs in the interpreter suite)."""

from __future__ import annotations

import pytest
import torch
from kernels_reference import unspecialised
from vllm_factory.kernels import select_backend, span_logits


def _plain(table, rows, weight, bias):
    hidden = (table[rows[:, 0]] + table[rows[:, 1]]).clamp_min(0)
    return hidden @ weight.T + (0 if bias is None else bias)


@pytest.mark.parametrize("with_bias", [True, False])
def test_fallback_is_the_gathered_sum_then_the_product(with_bias: bool) -> None:
    g = torch.Generator().manual_seed(0)
    table = torch.randn(30, 48, generator=g)
    rows = torch.randint(0, 30, (200, 2), generator=g)
    weight = torch.randn(7, 48, generator=g)
    bias = torch.randn(7, generator=g) if with_bias else None
    out = span_logits(table, rows, weight, bias)
    assert out.shape == (200, 7)
    torch.testing.assert_close(out, _plain(table, rows, weight, bias), rtol=1e-5, atol=1e-5)


def test_auto_is_the_fallback_on_cpu() -> None:
    assert select_backend("auto", torch.zeros(1)) == "torch"


@pytest.mark.parametrize(
    ("table", "rows", "weight", "bias", "message"),
    [
        ((4, 8), ((3, 2), torch.int64), (5, 9), None, "share inner"),
        ((4, 8), ((3, 3), torch.int64), (5, 8), None, "rows must be integer"),
        ((4, 8), ((3, 2), torch.float32), (5, 8), None, "rows must be integer"),
        ((4, 8), ((3, 2), torch.int64), (5, 8), (4,), "bias must be"),
    ],
)
def test_bad_arguments_are_refused(table, rows, weight, bias, message: str) -> None:
    (rows_shape, rows_dtype) = rows
    with pytest.raises(ValueError, match=message):
        span_logits(
            torch.zeros(table),
            torch.zeros(rows_shape, dtype=rows_dtype),
            torch.zeros(weight),
            None if bias is None else torch.zeros(bias),
        )


def test_dtypes_must_agree() -> None:
    with pytest.raises(ValueError, match="one dtype"):
        span_logits(
            torch.zeros(4, 8), torch.zeros(3, 2, dtype=torch.long), torch.zeros(5, 8).half()
        )


def test_per_step_arguments_compile_no_variants() -> None:
    # A served step's span count, label count and output stride change with its prompts; a
    # Triton variant per value class of each (== 1, divisible by 16, other) would be compiled
    # inside the engine at the first step of a new class.
    names = unspecialised("_triton_span_logits", "_span_logits_kernel")
    assert {"n_spans", "n_labels", "stride_o"} <= names
