"""glinker's L3 linking layer in process, timed (runs in the glinker venv): the baseline of the
linking bench (``vllm_factory.testing.gliner.link_bench``).

    python glinker_link_bench.py --checkpoint DIR --inputs inputs.json --out result.json \\
        --batch-sizes 1,8,32 --warmup 8 --requests 64 [--device cuda] [--dtype bfloat16]

glinker's own pipeline (``glinker_pipeline.build_config``, without L4) runs once untimed on
``inputs['texts']``: its L1 mentions and L2 candidates per text are the workload (written to
the output, so that the served side sends the same). Then glinker's L3 processor is timed on
request ``i`` = text ``i mod len(texts)``, ``--batch-sizes`` texts per call (L3 loops over
its texts, one model call each), in two set-ups a glinker user has:

- ``plain``: every call encodes its candidates' labels (what ``l3_batch`` does by default);
- ``precomputed``: the knowledge base's label embeddings computed once up front
  (``executor.precompute_embeddings()``, its seconds reported apart), L3 then skips the label
  encoder (bi-encoder checkpoints only).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from glinker_pipeline import build_config

RECORD_FIELDS = ("label", "description", "entity_type", "popularity")


def plain_copy(record):
    """An L2 record without its precomputed embedding (a fresh L2 lookup's result)."""
    return record.model_copy(update={"embedding": None, "embedding_model_id": None})


def time_l3(l3, items: list[tuple], warmup: int, requests: int, batch_size: int) -> dict:
    """Latencies (per request: its call's seconds) and wall time of ``requests`` requests
    after ``warmup`` untimed ones, ``batch_size`` texts per L3 call."""
    n = len(items)
    for start in range(0, warmup, batch_size):
        chunk = [items[i % n] for i in range(start, min(start + batch_size, warmup))]
        l3(texts=[c[0] for c in chunk], candidates=[c[1] for c in chunk],
           l1_entities=[c[2] for c in chunk])  # fmt: skip
    latencies, links = [], 0
    started = time.perf_counter()
    for start in range(warmup, warmup + requests, batch_size):
        chunk = [items[i % n] for i in range(start, min(start + batch_size, warmup + requests))]
        began = time.perf_counter()
        out = l3(texts=[c[0] for c in chunk], candidates=[c[1] for c in chunk],
                 l1_entities=[c[2] for c in chunk])  # fmt: skip
        latencies += [time.perf_counter() - began] * len(chunk)
        links += sum(len(entities) for entities in out.entities)
    return {"batch_size": batch_size, "latencies_s": latencies, "links": links,
            "wall_seconds": time.perf_counter() - started}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--inputs", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int)
    args = ap.parse_args()
    import torch
    from glinker import ProcessorFactory

    if args.threads:
        torch.set_num_threads(args.threads)
    inputs = json.loads(args.inputs.read_text(encoding="utf-8"))
    config = build_config(inputs, args.checkpoint, with_l4=False)
    for node in config["nodes"]:
        if "device" in node["config"] or node["id"] in ("l1", "l3"):
            node["config"]["device"] = args.device
    executor = ProcessorFactory.create_from_dict(config)
    executor.load_entities(inputs["entities"])
    context = executor.execute({"texts": inputs["texts"]})
    # Requests: the texts with at least one candidate (glinker links nothing in the others).
    keep = [i for i, c in enumerate(context.get("l2_result").candidates) if c]
    texts = [inputs["texts"][i] for i in keep]
    context = executor.execute({"texts": texts})
    mentions = context.get("l1_result").entities
    candidates = context.get("l2_result").candidates
    items = [(t, [plain_copy(r) for r in c], m) for t, c, m in zip(texts, candidates, mentions)]
    l3 = executor.processors["l3"]
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    runs = {"plain": [time_l3(l3, items, args.warmup, args.requests, b) for b in sizes]}

    precompute_seconds = None
    if l3.component.supports_precomputed_embeddings:
        started = time.perf_counter()
        executor.precompute_embeddings()
        precompute_seconds = time.perf_counter() - started
        context = executor.execute({"texts": texts})  # L2 now returns records with embeddings
        with_embeddings = [(t, list(c), m) for t, c, m in
                           zip(texts, context.get("l2_result").candidates, mentions)]  # fmt: skip
        runs["precomputed"] = [
            time_l3(l3, with_embeddings, args.warmup, args.requests, b) for b in sizes
        ]

    from importlib.metadata import version

    workload = [
        {"text": t,
         "mentions": [{"start": m.start, "end": m.end} for m in ms],
         "candidates": [{"id": r.entity_id, **{k: getattr(r, k) for k in RECORD_FIELDS}}
                        for r in rs]}
        for t, rs, ms in zip(texts, candidates, mentions)
    ]  # fmt: skip
    args.out.write_text(json.dumps({
        "versions": {name: version(name) for name in ("glinker", "gliner", "torch")},
        "settings": {"device": args.device, "threads": torch.get_num_threads(),
                     "knowledge_base": len(inputs["entities"]),
                     "precompute_seconds": precompute_seconds},
        "runs": runs, "workload": workload,
    }), encoding="utf-8")  # fmt: skip


if __name__ == "__main__":
    main()
