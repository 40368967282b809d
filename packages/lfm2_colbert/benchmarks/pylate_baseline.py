"""PyLate baseline for the benchmark runner; runs in the PyLate reference venv.

Contract (see ``vllm_factory.core.testing.bench.run_reference``)::

    python pylate_baseline.py --checkpoint DIR --texts texts.json --out raw.json \
        --device cpu --dtype float32 --warmup 8 --requests 30 --batch-sizes 1,8,32 \
        --min-batches 2

Loads the checkpoint with ``pylate.models.ColBERT``, encodes ``--warmup`` texts unmeasured,
then for each batch size b encodes ``texts[W : W + max(requests, min_batches * b)]``
(cyclically) as
documents (``is_query=False``) in consecutive chunks of b, one ``model.encode`` call per
chunk. Batch size 1 is the sequential baseline. A text's latency is its chunk's wall time.
Writes raw timings only; the runner computes the statistics.
"""

from __future__ import annotations

import argparse
import json
import time
from importlib.metadata import version
from pathlib import Path

import torch
from pylate import models


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--texts", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--min-batches", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    texts: list[str] = json.loads(args.texts.read_text(encoding="utf-8"))["texts"]
    model = models.ColBERT(args.checkpoint, device=args.device)
    model.to(getattr(torch, args.dtype))
    model.eval()

    def encode(chunk: list[str]) -> None:
        model.encode(chunk, batch_size=len(chunk), is_query=False, show_progress_bar=False)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    for index in range(args.warmup):
        encode([texts[index % len(texts)]])
    runs = []
    for batch_size in sorted({int(b) for b in args.batch_sizes.split(",")}):
        count = max(args.requests, args.min_batches * batch_size)
        indices = [(args.warmup + k) % len(texts) for k in range(count)]
        latencies: list[float] = []
        started = time.perf_counter()
        for offset in range(0, count, batch_size):
            chunk = indices[offset : offset + batch_size]
            chunk_started = time.perf_counter()
            encode([texts[i] for i in chunk])
            latencies += [time.perf_counter() - chunk_started] * len(chunk)
        wall = time.perf_counter() - started
        runs.append(
            {"batch_size": batch_size, "indices": indices, "latencies_s": latencies,
             "wall_seconds": wall}
        )  # fmt: skip
        print(f"pylate batch size {batch_size}: {count / wall:.2f} texts/s", flush=True)
    result = {
        "versions": {name: version(name) for name in ("pylate", "torch", "transformers")},
        "settings": {
            "device": args.device,
            "dtype": args.dtype,
            "torch_threads": torch.get_num_threads(),
            "document_length": model.document_length,
        },
        "runs": runs,
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
