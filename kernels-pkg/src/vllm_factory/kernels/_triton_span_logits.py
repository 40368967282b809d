"""Triton kernel of ``span_logits``. Imported lazily, once the Triton backend was selected."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._dispatch import next_power_of_2


# The span count (bucketed rows), the label count and the output stride (the label count)
# change with a step's prompts; Triton would compile a variant per value class of each (== 1,
# divisible by 16, other) inside the engine at the first step of a new class.
@triton.jit(do_not_specialize=["n_spans", "n_labels", "stride_o"])
def _span_logits_kernel(
    table_ptr,
    rows_ptr,
    weight_ptr,
    bias_ptr,
    out_ptr,
    n_spans,
    inner,
    n_labels,
    stride_t,
    stride_w,
    stride_o,
    HAS_BIAS: tl.constexpr,
    IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_L: tl.constexpr,
):
    # One program: BLOCK_M spans x BLOCK_L labels. Per BLOCK_K slice of the inner dimension it
    # gathers the spans' two table rows, makes relu(start + end) in registers (rounded to the
    # table's dtype, as the fallback's embedding_bag output is) and multiplies it with the
    # labels' weight slice; the [spans, inner] hidden layer is never written.
    spans = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    labels = tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)
    span_ok = spans < n_spans
    label_ok = labels < n_labels
    first = tl.load(rows_ptr + spans.to(tl.int64) * 2, mask=span_ok, other=0).to(tl.int64)
    second = tl.load(rows_ptr + spans.to(tl.int64) * 2 + 1, mask=span_ok, other=0).to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_L), dtype=tl.float32)
    for k0 in range(0, inner, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        col_ok = cols < inner
        tile_ok = span_ok[:, None] & col_ok[None, :]
        start = tl.load(
            table_ptr + first[:, None] * stride_t + cols[None, :], mask=tile_ok, other=0.0
        )
        end = tl.load(
            table_ptr + second[:, None] * stride_t + cols[None, :], mask=tile_ok, other=0.0
        )
        hidden = tl.maximum(start.to(tl.float32) + end.to(tl.float32), 0.0)
        # rounded to the table's dtype, as the fallback's embedding_bag output is; the product
        # then runs on float32 operands: exact for 16-bit values even at TF32 precision (whose
        # 10-bit mantissa holds theirs), IEEE for float32 tables
        hidden = hidden.to(table_ptr.dtype.element_ty).to(tl.float32)
        w = tl.load(
            weight_ptr + labels[None, :].to(tl.int64) * stride_w + cols[:, None],
            mask=col_ok[:, None] & label_ok[None, :],
            other=0.0,
        ).to(tl.float32)  # [BLOCK_K, BLOCK_L]
        if IEEE:
            acc += tl.dot(hidden, w, input_precision="ieee")
        else:
            acc += tl.dot(hidden, w, input_precision="tf32")
    if HAS_BIAS:
        acc += tl.load(bias_ptr + labels, mask=label_ok, other=0.0).to(tl.float32)[None, :]
    out = out_ptr + spans.to(tl.int64)[:, None] * stride_o + labels[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=span_ok[:, None] & label_ok[None, :])


def span_logits_triton(
    table: torch.Tensor, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """Triton implementation of ``span_logits`` (arguments already validated)."""
    n, labels, inner = rows.shape[0], weight.shape[0], table.shape[1]
    out = torch.empty((n, labels), dtype=table.dtype, device=table.device)
    if n == 0 or labels == 0:
        return out
    table = table if table.stride(-1) == 1 else table.contiguous()
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    rows = rows.contiguous()
    block_l = min(64, max(16, next_power_of_2(labels)))  # tl.dot needs 16 at least
    block_m, block_k = 64, 64
    grid = (triton.cdiv(n, block_m), triton.cdiv(labels, block_l))
    _span_logits_kernel[grid](
        table, rows, weight, bias if bias is not None else table, out,
        n, inner, labels, table.stride(0), weight.stride(0), out.stride(0),
        HAS_BIAS=bias is not None, IEEE=table.dtype == torch.float32,
        BLOCK_M=block_m, BLOCK_K=block_k, BLOCK_L=block_l, num_warps=4,
    )  # fmt: skip
    return out
