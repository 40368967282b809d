"""GPU micro-benchmark: Triton kernels vs the PyTorch fallbacks and vs ``torch.compile`` of
the fallbacks (ModernBERT-base widths; ``span_logits`` at deberta_gliner's bench checkpoint's:
hidden 512, so a 2048-wide span hidden layer, 12 widths, 5 labels, 0.68 words per token as its
512-token texts have; ``--tokens 8192`` is a served step of 16 texts).

Usage: python benchmarks/bench_kernels.py --out bench.json [--tokens 128 512 2048] [--no-compile]

For each kernel, dtype (bf16, fp32) and token count it times the backends with CUDA events
(median of several repeats after warm-up), twice: eager (includes Python and launch overhead,
which dominates at these sizes) and replayed from a CUDA graph (GPU time, as under vLLM's CUDA
graphs). The third backend, ``compiled``, is the PyTorch fallback through ``torch.compile``
(Inductor, default mode, static shapes): what the fallback would cost inside a compiled model,
which is the bar a hand-written kernel has to beat to stay on a model path. It checks that the
outputs agree, prints a table and
writes every row to the JSON file given by --out. Exits with status 0 and a message when no
CUDA device is present (so CI on CPU machines can call it unconditionally).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

import torch
from bench_common import add_timing_args, gpu_ready, run_meta, time_ms

# ModernBERT-base
HIDDEN = 768
HEADS = 12
HEAD_DIM = 64
INTERMEDIATE = 1152
GLOBAL_THETA = 160000.0
MAX_POSITIONS = 8192
# GLiNER span head (deberta_gliner bench checkpoint)
SPAN_INNER = 2048
SPAN_WIDTHS = 12
SPAN_LABELS = 5


def time_graph_ms(fn: Callable[[], Any], warmup: int, iters: int, repeats: int) -> float:
    """Like ``time_ms`` but replays ``iters`` calls captured in one CUDA graph.

    This removes Python/launch overhead (as vLLM's CUDA graphs do), leaving GPU time only.
    """
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):  # compile Triton kernels and warm allocators before capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iters):
            fn()
    return time_ms(graph.replay, 2, 1, repeats) / iters


def max_abs_diff(a: Any, b: Any) -> float:
    if isinstance(a, tuple):
        return max(max_abs_diff(x, y) for x, y in zip(a, b))
    return (a.float() - b.float()).abs().max().item()


def tolerance(dtype: torch.dtype) -> float:
    # fp32: last-bit differences of erf/exp/FMA; bf16: one ulp of values up to ~4-8.
    return 1e-4 if dtype == torch.float32 else 6.25e-2


def cases(tokens: int, dtype: torch.dtype) -> list[tuple[str, Callable[[str], Any], int]]:
    """(name, call(backend), bytes moved by an ideal kernel) per kernel."""
    from vllm_factory.kernels import (
        RMSOptions,
        build_rope_cache,
        fused_add_layernorm,
        fused_geglu,
        fused_layernorm,
        fused_rmsnorm,
        span_logits,
    )
    from vllm_factory.kernels import fused_rope as rope

    dev = "cuda"
    el = torch.tensor([], dtype=dtype).element_size()
    cos, sin = build_rope_cache(MAX_POSITIONS, HEAD_DIM, GLOBAL_THETA, device=dev)
    q = torch.randn(tokens, HEADS, HEAD_DIM, device=dev).to(dtype)
    k = torch.randn(tokens, HEADS, HEAD_DIM, device=dev).to(dtype)
    positions = torch.arange(tokens, device=dev) % MAX_POSITIONS
    x_mlp = torch.randn(tokens, 2 * INTERMEDIATE, device=dev).to(dtype)
    x = torch.randn(tokens, HIDDEN, device=dev).to(dtype)
    res = torch.randn(tokens, HIDDEN, device=dev).to(dtype)
    w = (torch.rand(HIDDEN, device=dev) + 0.5).to(dtype)
    act = tokens * HIDDEN * el
    gemma = RMSOptions(offset=1.0)
    # GLiNER span scoring: per word a start and an end row of the span hidden layer's table
    words = max(1, int(tokens * 0.68))
    table = torch.randn(2 * words, SPAN_INNER, device=dev).to(dtype)
    first = torch.arange(words, device=dev)[:, None]
    last = (first + torch.arange(SPAN_WIDTHS, device=dev)).clamp(max=words - 1)
    span_rows = torch.stack((first.expand_as(last), last + words), -1).view(-1, 2)
    span_weight = (torch.randn(SPAN_LABELS, SPAN_INNER, device=dev) / SPAN_INNER**0.5).to(dtype)
    span_bias = torch.randn(SPAN_LABELS, device=dev).to(dtype)
    return [
        (
            "rope",
            lambda b: rope(q, k, positions, cos, sin, backend=b),
            4 * q.numel() * el + 2 * tokens * (HEAD_DIM // 2) * 4,
        ),
        ("geglu", lambda b: fused_geglu(x_mlp, "none", backend=b), 3 * tokens * INTERMEDIATE * el),
        ("layernorm", lambda b: fused_layernorm(x, w, None, 1e-5, backend=b), 2 * act),
        ("add_layernorm", lambda b: fused_add_layernorm(x, res, w, None, 1e-5, backend=b), 4 * act),
        ("rmsnorm_gemma", lambda b: fused_rmsnorm(x, w, 1e-6, gemma, backend=b), 2 * act),
        (
            "span_logits",
            lambda b: span_logits(table, span_rows, span_weight, span_bias, backend=b),
            table.numel() * el + span_rows.numel() * 8 + span_rows.shape[0] * SPAN_LABELS * el,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    add_timing_args(parser, warmup=10, iters=50)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    args = parser.parse_args(argv)

    if not gpu_ready("bench_kernels"):
        return 0

    torch.manual_seed(0)
    rows: list[dict[str, Any]] = []
    ok = True
    header = (
        f"{'kernel':<14}{'dtype':<10}{'tokens':>7}{'torch ms':>10}{'triton ms':>10}{'speedup':>8}"
        f"{'graph torch':>12}{'graph triton':>13}{'speedup':>8}{'GB/s':>8}{'max|diff|':>11}  ok"
    )
    print(header)
    print("-" * len(header))
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for tokens in args.tokens:
            for name, call, nbytes in cases(tokens, dtype):
                fns = {"torch": lambda c=call: c("torch"), "triton": lambda c=call: c("triton")}
                if not args.no_compile:
                    # Every case's lambda shares one code object: without a reset, dynamo's
                    # recompile limit would silently leave later cases eager.
                    torch._dynamo.reset()
                    fns["compiled"] = torch.compile(fns["torch"], dynamic=False)
                with torch.inference_mode():
                    diff = max_abs_diff(fns["triton"](), fns["torch"]())
                    if "compiled" in fns:
                        diff = max(diff, max_abs_diff(fns["compiled"](), fns["torch"]()))
                    timings = {
                        b: time_ms(fn, args.warmup, args.iters, args.repeats)
                        for b, fn in fns.items()
                    }
                    graphed = {
                        b: time_graph_ms(fn, args.warmup, args.iters, args.repeats)
                        for b, fn in fns.items()
                    }
                t_torch, t_triton = timings["torch"], timings["triton"]
                g_torch, g_triton = graphed["torch"], graphed["triton"]
                agree = diff <= tolerance(dtype)
                ok &= agree
                row = {
                    "kernel": name,
                    "dtype": dtype_name,
                    "tokens": tokens,
                    "torch_ms": t_torch,
                    "triton_ms": t_triton,
                    "speedup": t_torch / t_triton,
                    "graph_torch_ms": g_torch,
                    "graph_triton_ms": g_triton,
                    "graph_speedup": g_torch / g_triton,
                    "graph_triton_gbps": nbytes / (g_triton * 1e-3) / 1e9,
                    "max_abs_diff": diff,
                    "agree": agree,
                }
                if "compiled" in fns:
                    row["compiled_ms"] = timings["compiled"]
                    row["graph_compiled_ms"] = graphed["compiled"]
                    # > 1: the Triton kernel beats the compiled fallback under CUDA graphs
                    row["graph_speedup_vs_compiled"] = graphed["compiled"] / g_triton
                rows.append(row)
                print(
                    f"{name:<14}{dtype_name:<10}{tokens:>7}{t_torch:>10.4f}{t_triton:>10.4f}"
                    f"{row['speedup']:>7.2f}x{g_torch:>12.4f}{g_triton:>13.4f}"
                    f"{row['graph_speedup']:>7.2f}x{row['graph_triton_gbps']:>8.0f}{diff:>11.2e}  "
                    f"{'yes' if agree else 'NO'}"
                    + (
                        f"  compiled {timings['compiled']:.4f} / graph {graphed['compiled']:.4f}"
                        f" ({row['graph_speedup_vs_compiled']:.2f}x)"
                        if "compiled" in fns
                        else ""
                    )
                )

    shapes = {"hidden": HIDDEN, "heads": HEADS, "head_dim": HEAD_DIM, "intermediate": INTERMEDIATE}
    meta = run_meta(args, shapes)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": rows, "all_agree": ok}, f, indent=2)
    print(f"wrote {args.out}; outputs agree: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
