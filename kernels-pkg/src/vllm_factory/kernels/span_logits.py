"""GLiNER span scoring: a span's hidden layer from two table rows, then its label logits.

``relu(table[rows[:, 0]] + table[rows[:, 1]]) @ weight.T + bias``: the span MLP's first layer
made per word (start and end terms, :class:`MarkerV0.span_table` of the GLiNER head) summed per
span, and its last layer folded into the step's label vectors. The fallback builds the
``[spans, inner]`` hidden layer (one ``embedding_bag``) and multiplies it; the Triton kernel
keeps each tile of it in registers and never writes it out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._dispatch import select_backend


def _check_span_logits_args(
    table: torch.Tensor, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> None:
    if table.dim() != 2 or weight.dim() != 2 or weight.shape[1] != table.shape[1]:
        raise ValueError(
            f"table [R, inner] and weight [labels, inner] must share inner, got "
            f"{tuple(table.shape)} and {tuple(weight.shape)}"
        )
    if rows.dim() != 2 or rows.shape[1] != 2 or rows.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"rows must be integer [n, 2], got {rows.dtype} {tuple(rows.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be [labels] = [{weight.shape[0]}], got {tuple(bias.shape)}")
    if weight.dtype != table.dtype or (bias is not None and bias.dtype != table.dtype):
        raise ValueError("table, weight and bias must share one dtype")


def _span_logits_torch(
    table: torch.Tensor, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    hidden = F.embedding_bag(rows, table, mode="sum").relu_()
    if bias is None:
        return hidden @ weight.T
    return torch.addmm(bias, hidden, weight.T)


def span_logits(
    table: torch.Tensor,
    rows: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """``[n, labels]`` logits of the spans whose two table rows are ``rows`` ``[n, 2]``:
    ``relu(table[rows[:, 0]] + table[rows[:, 1]]) @ weight.T + bias``, in ``table.dtype``
    (``table`` ``[R, inner]``, ``weight`` ``[labels, inner]``, ``bias`` ``[labels]``). Both
    backends round the hidden layer to ``table.dtype`` before the product and accumulate it in
    float32."""
    _check_span_logits_args(table, rows, weight, bias)
    if select_backend(backend, table, rows, weight, kernel="span_logits") == "triton":
        from ._triton_span_logits import span_logits_triton

        return span_logits_triton(table, rows, weight, bias)
    return _span_logits_torch(table, rows, weight, bias)
