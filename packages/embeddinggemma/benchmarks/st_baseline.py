"""sentence-transformers baseline for the benchmark runner; runs in the ST reference venv.

Contract: see ``vllm_factory.core.testing.bench.run_reference``. Loads the checkpoint with
``SentenceTransformer`` and encodes the texts without a prompt (as the served requests do), in
consecutive chunks of each batch size, one ``encode`` call per chunk; batch size 1 is the
sequential baseline. Writes raw timings only.
"""

from __future__ import annotations

import argparse
import json
import time
from importlib.metadata import version
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer


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
    model = SentenceTransformer(args.checkpoint, device=args.device)
    model.to(getattr(torch, args.dtype))
    model.eval()

    def encode(chunk: list[str]) -> None:
        model.encode(chunk, batch_size=len(chunk), show_progress_bar=False)
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
        print(f"sentence-transformers batch size {batch_size}: {count / wall:.2f} texts/s")
    result = {
        "versions": {
            name: version(name) for name in ("sentence-transformers", "torch", "transformers")
        },
        "settings": {
            "device": args.device,
            "dtype": args.dtype,
            "torch_threads": torch.get_num_threads(),
            "max_seq_length": model.max_seq_length,
        },
        "runs": runs,
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
