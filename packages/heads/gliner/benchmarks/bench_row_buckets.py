"""Host time of a cuBLAS product when its row count changes at every call (a served GLiNER
head's words, labels and spans do, step after step) against the same rows rounded up to the
head's buckets (``vllm_factory.heads.gliner.span_graphs.RowBuckets``).

    python packages/heads/gliner/benchmarks/bench_row_buckets.py --out row-buckets.json

Per case: the mean host time of one ``F.linear`` launch (no synchronisation inside the timed
loop: what the engine's thread pays) and the device time of the loop, for the GLiNER head's
shapes (width 768: the endpoint MLPs' 768 -> 3072 -> 768, the span table's 768 -> 3072 and
the labels' product with the span MLP's last layer), in bfloat16. Nothing is warmed up first:
the first case run (fixed rows of the first shape) also pays cuBLAS's start-up, as in
``docs/benchmarks/h200/2026-11-29-c17301b-gliner-head-row-buckets.json``; compare the other
three cases.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch
import torch.nn.functional as F
from vllm_factory.heads.gliner.span_graphs import RowBuckets


def run(rows: list[int], k: int, n: int, bias: bool, dtype: torch.dtype) -> dict[str, float]:
    device = torch.device("cuda")
    big = max(rows)
    x = torch.randn(big, k, device=device, dtype=dtype)
    w = torch.randn(n, k, device=device, dtype=dtype)
    b = torch.randn(n, device=device, dtype=dtype) if bias else None
    torch.cuda.synchronize()
    host = 0.0
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for m in rows:
        t = time.perf_counter()
        F.linear(x[:m], w, b)
        host += time.perf_counter() - t
    end.record()
    torch.cuda.synchronize()
    return {"host_us_per_call": 1e6 * host / len(rows), "device_ms_total": start.elapsed_time(end)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    rng = random.Random(0)
    buckets = RowBuckets(True)
    shapes = {"endpoint MLP in (768 -> 3072, bias)": (768, 3072, True),
              "endpoint MLP out (3072 -> 768, bias)": (3072, 768, True),
              "span table (768 -> 3072)": (768, 3072, False),
              "labels x last layer (768 -> 3072)": (768, 3072, False)}  # fmt: skip
    results = []
    for name, (k, n, bias) in shapes.items():
        small = name.startswith("labels")
        low, high = (40, 120) if small else (3000, 6000)
        varying = [rng.randint(low, high) for _ in range(args.calls)]
        for label, rows in (
            ("fixed rows (one shape)", [varying[0]] * args.calls),
            ("rows change every call", varying),
            ("rows in RowBuckets", [buckets.size(m) for m in varying]),
            ("rows change every call, second pass", varying),
        ):
            r = run(rows, k, n, bias, torch.bfloat16)
            r.update(shape=name, rows=label, distinct=len(set(rows)))
            results.append(r)
            print(f"{name:40s} {label:38s} distinct {len(set(rows)):4d} "
                  f"host {r['host_us_per_call']:8.1f} us/call  device {r['device_ms_total']:8.1f} ms")  # fmt: skip
    info = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "calls": args.calls}  # fmt: skip
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"info": info, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
