"""glinker's L3 linking layer in process, timed (runs in the glinker venv): the baseline of the
linking bench (``vllm_factory.testing.gliner.link_bench``).

    python glinker_link_bench.py --checkpoint DIR --inputs inputs.json --out result.json \\
        --batch-sizes 1,8,32 --warmup 8 --requests 64 [--device cuda]

``inputs.json``: ``{"workload": [{"text", "mentions": [{"start", "end"}], "candidates":
[glinker DatabaseRecord fields]}], "template", "threshold", "max_length"}``. glinker's L3
processor (``l3_batch``, built by glinker's ``ConfigBuilder`` with the template as its
schema) is timed on request ``i`` = workload item ``i mod n``, ``--batch-sizes`` texts per
call (L3 loops over its texts, one model call each), in two set-ups a glinker user has:

- ``plain``: every call encodes its candidates' labels (what ``l3_batch`` does by default);
- ``precomputed``: the label embeddings of every entity the workload uses computed once up
  front with L3's own ``encode_labels`` (what ``executor.precompute_embeddings()`` does; its
  seconds reported apart), L3 then skips the label encoder (bi-encoder checkpoints only).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace


def build_l3(checkpoint: str, inputs: dict, device: str):
    from glinker import ConfigBuilder, ProcessorFactory

    builder = ConfigBuilder(name="vllm-factory-link-bench")
    builder.l1.gliner(model=checkpoint, labels=["entity"], max_length=inputs["max_length"])
    builder.l2.add("dict", priority=0)
    builder.l3.configure(model=checkpoint, threshold=inputs["threshold"],
                         max_length=inputs["max_length"], device=device)  # fmt: skip
    builder.set_schema_template(inputs["template"])
    executor = ProcessorFactory.create_from_dict(builder.get_config())
    l3 = executor.processors["l3"]
    l3.schema = {"template": inputs["template"]}  # what glinker's executor sets before a run
    return l3


def time_l3(l3, items: list[tuple], warmup: int, requests: int, batch_size: int) -> dict:
    """Latencies (per request: its call's seconds) and wall time of ``requests`` requests
    after ``warmup`` untimed ones, ``batch_size`` texts per L3 call."""
    n = len(items)

    def call(first: int, last: int):
        chunk = [items[i % n] for i in range(first, last)]
        return l3(texts=[c[0] for c in chunk], candidates=[c[1] for c in chunk],
                  l1_entities=[c[2] for c in chunk])  # fmt: skip

    for start in range(0, warmup, batch_size):
        call(start, min(start + batch_size, warmup))
    latencies, links = [], 0
    started = time.perf_counter()
    for start in range(warmup, warmup + requests, batch_size):
        last = min(start + batch_size, warmup + requests)
        began = time.perf_counter()
        out = call(start, last)
        latencies += [time.perf_counter() - began] * (last - start)
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
    args = ap.parse_args()
    from importlib.metadata import version

    import torch
    from glinker.l2.models import DatabaseRecord

    inputs = json.loads(args.inputs.read_text(encoding="utf-8"))
    l3 = build_l3(args.checkpoint, inputs, args.device)
    items = [
        (item["text"], [DatabaseRecord(**record) for record in item["candidates"]],
         [SimpleNamespace(**mention) for mention in item["mentions"]])
        for item in inputs["workload"]
    ]  # fmt: skip
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    runs = {"plain": [time_l3(l3, items, args.warmup, args.requests, b) for b in sizes]}

    settings = {"device": args.device, "threads": torch.get_num_threads()}
    if l3.component.supports_precomputed_embeddings:
        records = {r.entity_id: r for _, candidates, _ in items for r in candidates}
        labels = [inputs["template"].format(**r.model_dump()) for r in records.values()]
        # gliner pads every label to its label tokenizer's limit when it encodes labels on
        # their own (512 tokens here, several times the cost of the labels themselves); the
        # limit is set to the longest label's length for this, which changes no vector.
        tokenizer = l3.component.model.data_processor.labels_tokenizer
        limit = tokenizer.model_max_length
        tokenizer.model_max_length = max(len(ids) for ids in tokenizer(labels)["input_ids"])
        started = time.perf_counter()
        vectors = l3.component.encode_labels(labels).tolist()
        tokenizer.model_max_length = limit
        settings["precompute_seconds"] = time.perf_counter() - started
        settings["precomputed_entities"] = len(records)
        embedded = {
            entity_id: r.model_copy(update={"embedding": vector,
                                            "embedding_model_id": l3.config.model_name})
            for (entity_id, r), vector in zip(records.items(), vectors)
        }  # fmt: skip
        items = [(t, [embedded[r.entity_id] for r in c], m) for t, c, m in items]
        runs["precomputed"] = [time_l3(l3, items, args.warmup, args.requests, b) for b in sizes]

    args.out.write_text(json.dumps({
        "versions": {name: version(name) for name in ("glinker", "gliner", "torch")},
        "settings": settings, "runs": runs,
    }), encoding="utf-8")  # fmt: skip


if __name__ == "__main__":
    main()
