"""gliner baseline for the benchmark runner; runs in the GLiNER reference venv.

Contract: see ``vllm_factory.core.testing.bench.run_reference``. Loads the checkpoint with
``gliner.GLiNER.from_pretrained``, runs ``--warmup`` texts unmeasured, then for each batch
size b runs ``texts[W : W + max(requests, min_batches * b)]`` (cyclically) in consecutive
chunks of b, one ``model.inference(chunk, LABELS, batch_size=b)`` call per chunk, with the
same labels and threshold as the served requests. A text's latency is its chunk's wall time.
"""

from __future__ import annotations

import argparse
import json
import time
from importlib.metadata import version
from pathlib import Path

import torch

LABELS = ["person", "organization", "location", "date", "product"]
THRESHOLD = 0.5


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
    from gliner import GLiNER

    texts: list[str] = json.loads(args.texts.read_text(encoding="utf-8"))["texts"]
    model = GLiNER.from_pretrained(args.checkpoint, local_files_only=True)
    model.to(args.device).to(getattr(torch, args.dtype)).eval()

    def run(chunk: list[str]) -> None:
        model.inference(chunk, LABELS, threshold=THRESHOLD, batch_size=len(chunk))
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    for index in range(args.warmup):
        run([texts[index % len(texts)]])
    runs = []
    for batch_size in sorted({int(b) for b in args.batch_sizes.split(",")}):
        count = max(args.requests, args.min_batches * batch_size)
        indices = [(args.warmup + k) % len(texts) for k in range(count)]
        latencies: list[float] = []
        started = time.perf_counter()
        for start in range(0, count, batch_size):
            chunk = indices[start : start + batch_size]
            t0 = time.perf_counter()
            run([texts[i] for i in chunk])
            latencies += [time.perf_counter() - t0] * len(chunk)
        wall = time.perf_counter() - started
        runs.append(
            {"batch_size": batch_size, "indices": indices, "latencies_s": latencies,
             "wall_seconds": wall}
        )  # fmt: skip
    result = {
        "versions": {p: version(p) for p in ("gliner", "torch", "transformers")},
        "settings": {"labels": LABELS, "threshold": THRESHOLD, "threads": torch.get_num_threads()},
        "runs": runs,
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
