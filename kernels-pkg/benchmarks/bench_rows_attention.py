"""GPU benchmark of ``attention_by_rows``, the in-graph attention of the ModernBERT and mT5
encoders: the Triton kernel at its default tiles (and, with ``--sweep``, at others) against
PyTorch's SDPA on the same sequences, at served shapes.

Usage: python benchmarks/bench_rows_attention.py --out rows-attention.json [--sweep]

Shapes: 12 heads of 64 (ModernBERT-base, mT5-base), bf16, ``--batch`` sequences of ``--length``
tokens packed (default 16 and 32 x 512: vLLM's 8192-token step and twice that). Forms: ``plain``
(every key of the sequence: ModernBERT's global layers), ``band`` (``|i - j| <= 64``: its local
layers) and ``t5`` (T5's bias by bucketed distance, 32 buckets, max_distance 128, unscaled).
SDPA gets ``[B, H, L, D]`` tensors made beforehand: no mask for ``plain`` (its flash kernel, the
bar for attention without a bias), a boolean band mask, and T5's bias as a float mask (what
mT5's split point runs). Before timing, every form and tile is compared with SDPA in fp32 on
the same inputs. The kernel's PyTorch fallback through ``torch.compile`` is timed too (the bar a
kernel on a model path has to beat). Exits 0 with a message when no CUDA device or no triton
is present.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from bench_common import add_timing_args, gpu_ready, run_meta, time_ms

HEADS, HEAD_DIM = 12, 64
BUCKETS, MAX_DISTANCE, HALF_WINDOW = 32, 128, 64
FORMS = ("plain", "band", "t5")
# (BLOCK_M, BLOCK_N, num_warps, num_stages); BLOCK_D is the head dim's power of two
SWEEP = list(itertools.product((64, 128), (64, 128), (4, 8), (2, 3)))


def t5_index(device: str) -> torch.Tensor:
    """A bucket per distance ``-MAX_DISTANCE..MAX_DISTANCE`` (T5's layout: the sign picks a
    half, log-spaced beyond a linear core); only its shape and spread matter for timing."""
    distance = torch.arange(-MAX_DISTANCE, MAX_DISTANCE + 1)
    half = BUCKETS // 2
    size = distance.abs().clamp(min=1).float()
    far = half // 2 + (size.log() / torch.tensor(MAX_DISTANCE / 2).log() * half // 2).long()
    bucket = torch.where(distance.abs() < half // 2, distance.abs(), far.clamp(max=half - 1))
    return (bucket + (distance > 0).long() * half).to(device=device, dtype=torch.int32)


def sdpa_inputs(
    form: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    batch: int,
    length: int,
    bias: torch.Tensor,
    index: torch.Tensor,
) -> tuple[list[torch.Tensor], dict[str, Any]]:
    """SDPA's ``[B, H, L, D]`` q / k / v and its keyword arguments for ``form``."""
    qs, ks, vs = (x.view(batch, length, HEADS, HEAD_DIM).transpose(1, 2).contiguous()
                  for x in (q, k, v))  # fmt: skip
    pos = torch.arange(length, device=q.device)
    distance = pos[:, None] - pos[None, :]
    if form == "plain":
        return [qs, ks, vs], {}
    if form == "band":
        return [qs, ks, vs], {"attn_mask": distance.abs() <= HALF_WINDOW}
    slot = distance.clamp(-MAX_DISTANCE, MAX_DISTANCE) + MAX_DISTANCE
    mask = bias.float()[:, index.long()[slot]].to(q.dtype)[None]  # [1, H, L, L], unscaled
    return [qs, ks, vs], {"attn_mask": mask, "scale": 1.0}


def measure(
    form: str,
    batch: int,
    length: int,
    *,
    device: str = "cuda",
    dtype: torch.dtype = torch.bfloat16,
    timing: tuple[int, int, int] = (5, 20, 5),
    sweep: bool = False,
    timer: Callable[..., float] = time_ms,
) -> dict[str, Any]:
    """One form at ``batch`` x ``length`` tokens: the kernel's error against SDPA in fp32, its
    time, SDPA's and the compiled fallback's, and (``sweep``) each SWEEP tile's error and time."""
    from vllm_factory.kernels import _triton_deberta_attention as kernel_module
    from vllm_factory.kernels import attention_by_rows, sequence_bounds, window_bounds

    default_blocks, default_stages = kernel_module._block_sizes, kernel_module.NUM_STAGES
    torch.manual_seed(0)
    dt = dtype
    tokens = batch * length
    bias = 0.5 * torch.randn(HEADS, BUCKETS, device=device, dtype=dt)
    index = t5_index(device)
    q, k, v = (torch.randn(tokens, HEADS, HEAD_DIM, device=device, dtype=dt) for _ in range(3))
    start, end = sequence_bounds(torch.arange(tokens, device=device) % length)
    if form == "band":
        start, end = window_bounds(start, end, HALF_WINDOW)
    extra = {"bias": bias, "bias_index": index, "scale": 1.0} if form == "t5" else {}
    out = torch.empty_like(q)

    def by_backend(backend: str) -> torch.Tensor:
        return attention_by_rows(q, k, v, start, end, length, out=out, backend=backend, **extra)

    rows_call = functools.partial(by_backend, "triton")
    tensors, kwargs = sdpa_inputs(form, q, k, v, batch, length, bias, index)
    exact = {n: a.float() if torch.is_tensor(a) and a.is_floating_point() else a
             for n, a in kwargs.items()}  # fmt: skip
    with torch.inference_mode():
        expected = F.scaled_dot_product_attention(*(t.float() for t in tensors), **exact)
        expected = expected.transpose(1, 2).reshape(tokens, HEADS, HEAD_DIM)

        def error() -> float:
            return (rows_call().float() - expected).abs().max().item()

        row: dict[str, Any] = {
            "form": form, "batch": batch, "length": length, "tokens": tokens, "heads": HEADS,
            "head_dim": HEAD_DIM, "dtype": str(dt).removeprefix("torch."),
            "rows_vs_fp32_max_abs": error(),
            "rows_ms": timer(rows_call, *timing),
            "sdpa_ms": timer(lambda: F.scaled_dot_product_attention(*tensors, **kwargs), *timing),
            "default_tiles": list(default_blocks(HEAD_DIM, length)),
            "default_stages": default_stages, "tile_sweep": {},
        }  # fmt: skip
        row["rows_vs_sdpa"] = row["rows_ms"] / row["sdpa_ms"]
        # The fallback through torch.compile: the bar the kernel has to beat to stay on the
        # model path (it reads the ranges on the host, so the graph breaks there).
        torch._dynamo.reset()
        try:
            compiled = torch.compile(functools.partial(by_backend, "torch"), dynamic=False)
            row["compiled_fallback_ms"] = timer(compiled, *timing)
        except Exception as exc:  # noqa: BLE001  (a fallback that fails to compile is data)
            row["compiled_fallback_ms"] = repr(exc)[:200]
        for m, n, warps, stages in SWEEP if sweep else ():
            key = str((m, n, warps, stages))
            tiles = (m, n, default_blocks(HEAD_DIM, length)[2], warps)
            kernel_module._block_sizes = lambda *_, c=tiles: c
            kernel_module.NUM_STAGES = stages
            try:
                row["tile_sweep"][key] = {"max_abs": error(), "ms": timer(rows_call, *timing)}
            except Exception as exc:  # noqa: BLE001  (a tile that fails to compile is data)
                row["tile_sweep"][key] = repr(exc)[:200]
            finally:
                kernel_module._block_sizes = default_blocks
                kernel_module.NUM_STAGES = default_stages
    errors = [row["rows_vs_fp32_max_abs"]] + [
        t["max_abs"] for t in row["tile_sweep"].values() if isinstance(t, dict)
    ]
    row["ok"] = max(errors) < 6.25e-2
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--length", type=int, default=512)
    add_timing_args(parser)
    parser.add_argument("--sweep", action="store_true", help="also time the SWEEP tiles")
    args = parser.parse_args(argv)
    if not gpu_ready("bench_rows_attention"):
        return 0
    timing = (args.warmup, args.iters, args.repeats)
    rows = []
    for batch, form in itertools.product(args.batch, FORMS):
        row = measure(form, batch, args.length, timing=timing, sweep=args.sweep)
        rows.append(row)
        tiles = [(t["ms"], c) for c, t in row["tile_sweep"].items() if isinstance(t, dict)]
        print(
            f"{form:<6} B={batch:<3} rows {row['rows_ms']:7.3f} ms  sdpa {row['sdpa_ms']:7.3f} ms  "
            f"x{row['rows_vs_sdpa']:5.2f}  compiled fallback {row['compiled_fallback_ms']}  "
            f"diff {row['rows_vs_fp32_max_abs']:.2e}  best tile {min(tiles, default=None)}"
        )
    ok = all(row["ok"] for row in rows)

    shapes = {"heads": HEADS, "head_dim": HEAD_DIM, "buckets": BUCKETS,
              "max_distance": MAX_DISTANCE, "half_window": HALF_WINDOW}  # fmt: skip
    meta = run_meta(args, shapes, sweep_key="(BLOCK_M, BLOCK_N, num_warps, num_stages)")
    out_path = pathlib.Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({"meta": meta, "results": rows, "ok": ok}, indent=2))
    print(f"wrote {out_path}; ok: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
