"""GPU benchmark of ``attention_by_rows``, the in-graph attention of the ModernBERT and mT5
encoders: the Triton kernel at its default tiles (and, with ``--sweep``, at others) against
PyTorch's SDPA on the same sequences, at served shapes.

Usage: python benchmarks/bench_rows_attention.py --out results/h200-rows-attention.json [--sweep]

Shapes: 12 heads of 64 (ModernBERT-base, mT5-base), bf16, ``--batch`` sequences of ``--length``
tokens packed (default 16 and 32 x 512: vLLM's 8192-token step and twice that). Forms: ``plain``
(every key of the sequence: ModernBERT's global layers), ``band`` (``|i - j| <= 64``: its local
layers) and ``t5`` (T5's bias by bucketed distance, 32 buckets, max_distance 128, unscaled).
SDPA gets ``[B, H, L, D]`` tensors made beforehand: no mask for ``plain`` (its flash kernel, the
bar for attention without a bias), a boolean band mask, and T5's bias as a float mask (what
mT5's split point runs). Before timing, every form and tile is compared with SDPA in fp32 on
the same inputs. Exits 0 with a message when no CUDA device or no triton is present.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pathlib
import platform
import sys
from typing import Any

import torch
import torch.nn.functional as F
from bench_deberta_attention import time_ms

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweep", action="store_true", help="also time the SWEEP tiles")
    args = parser.parse_args(argv)

    if not torch.cuda.is_available():
        print("bench_rows_attention: no CUDA device available; nothing to benchmark.")
        return 0
    from vllm_factory.kernels import (
        __version__,
        attention_by_rows,
        sequence_bounds,
        triton_available,
        window_bounds,
    )

    if not triton_available():
        print("bench_rows_attention: triton is not importable; nothing to compare.")
        return 0
    from vllm_factory.kernels import _triton_deberta_attention as kernel_module

    default_blocks, default_stages = kernel_module._block_sizes, kernel_module.NUM_STAGES
    timing = (args.warmup, args.iters, args.repeats)
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    bias = 0.5 * torch.randn(HEADS, BUCKETS, device=dev, dtype=dt)
    index = t5_index(dev)
    rows: list[dict[str, Any]] = []
    ok = True
    for batch, form in itertools.product(args.batch, FORMS):
        tokens = batch * args.length
        q, k, v = (torch.randn(tokens, HEADS, HEAD_DIM, device=dev, dtype=dt) for _ in range(3))
        start, end = sequence_bounds(torch.arange(tokens, device=dev) % args.length)
        if form == "band":
            start, end = window_bounds(start, end, HALF_WINDOW)
        extra = {"bias": bias, "bias_index": index, "scale": 1.0} if form == "t5" else {}
        out = torch.empty_like(q)

        def rows_call(q=q, k=k, v=v, s=start, e=end, extra=extra, out=out):
            return attention_by_rows(q, k, v, s, e, args.length, out=out, backend="triton", **extra)

        tensors, kwargs = sdpa_inputs(form, q, k, v, batch, args.length, bias, index)
        with torch.inference_mode():
            expected = F.scaled_dot_product_attention(
                *(t.float() for t in tensors),
                **{n: (a.float() if a.is_floating_point() else a) for n, a in kwargs.items()
                   if isinstance(a, torch.Tensor)},
                **{n: a for n, a in kwargs.items() if not isinstance(a, torch.Tensor)},
            ).transpose(1, 2).reshape(tokens, HEADS, HEAD_DIM)  # fmt: skip

            def diff(call=rows_call, expected=expected) -> float:
                return (call().float() - expected).abs().max().item()

            error = diff()
            t_rows = time_ms(rows_call, *timing)
            t_sdpa = time_ms(
                lambda t=tensors, a=kwargs: F.scaled_dot_product_attention(*t, **a), *timing
            )
            sweep: dict[str, Any] = {}
            for m, n, warps, stages in SWEEP if args.sweep else ():
                d = default_blocks(HEAD_DIM, args.length)[2]
                kernel_module._block_sizes = lambda *_, c=(m, n, d, warps): c
                kernel_module.NUM_STAGES = stages
                try:
                    tile_error = diff()
                    sweep[str((m, n, warps, stages))] = {
                        "ms": time_ms(rows_call, *timing), "max_abs": tile_error,
                    }  # fmt: skip
                    ok &= tile_error < 6.25e-2
                except Exception as exc:  # noqa: BLE001  (a tile that fails to compile is data)
                    sweep[str((m, n, warps, stages))] = repr(exc)[:200]
                finally:
                    kernel_module._block_sizes = default_blocks
                    kernel_module.NUM_STAGES = default_stages
        ok &= error < 6.25e-2
        row = {
            "form": form, "batch": batch, "length": args.length, "tokens": tokens,
            "heads": HEADS, "head_dim": HEAD_DIM, "dtype": "bfloat16",
            "rows_ms": t_rows, "sdpa_ms": t_sdpa, "rows_vs_sdpa": t_rows / t_sdpa,
            "rows_vs_fp32_max_abs": error, "default_tiles": list(default_blocks(HEAD_DIM, args.length)),
            "default_stages": default_stages, "tile_sweep": sweep,
        }  # fmt: skip
        rows.append(row)
        best = min((v["ms"], c) for c, v in sweep.items() if isinstance(v, dict)) if sweep else None
        print(
            f"{form:<6} B={batch:<3} rows {t_rows:7.3f} ms  sdpa {t_sdpa:7.3f} ms  "
            f"x{t_rows / t_sdpa:5.2f}  diff {error:.2e}  best tile {best}"
        )

    import triton

    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "vllm_factory_kernels": __version__,
        "shapes": {"buckets": BUCKETS, "max_distance": MAX_DISTANCE, "half_window": HALF_WINDOW},
        "timing": {"warmup": args.warmup, "iters": args.iters, "repeats": args.repeats},
        "sweep_key": "(BLOCK_M, BLOCK_N, num_warps, num_stages)",
    }
    out_path = pathlib.Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({"meta": meta, "results": rows, "ok": ok}, indent=2))
    print(f"wrote {out_path}; ok: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
