"""The entity-linking bench: glinker's L3 linking layer served (``data.candidates``) vs in
process, side by side in one run.

    nox -s bench -- --linking [--plugin deberta_gliner] [--quick] [--device cuda]

- Checkpoint: the package's bi-encoder GLiNER at bench size (its ``build_checkpoint.py --size
  bench --bi-encoder``: real width, a label encoder of the same shape, as the GLiNER linker
  models), scores calibrated to a trained model's entity density for glinker's L1 labels at
  threshold 0.5; prepared once, cached under ``.artifacts/<package>-bench/``.
- Workload (:func:`workload`): a knowledge base of a few hundred entities named after corpus
  words (``linking_inputs``: each name twice, as two near-duplicate entities; one-line
  descriptions) and 32 seeded texts of 100 - 200 words from the corpus's words, each naming
  ``MENTIONS`` entities. Per text, what glinker's L1 and L2 hand to L3: those mentions and,
  per mention, its two entities plus ``DISTRACTORS`` others (an L2 returns up to 5 per
  mention). Request ``i`` = text ``i mod n``: the text, its candidates (``{label}:
  {description}`` labels), its mentions as ``input_spans``, threshold 0.5. Texts come back,
  so candidates repeat across requests, as in a real linking service.
- Reference: glinker's L3 processor in process (``scripts/glinker_link_bench.py``, glinker
  venv) on the same workload at 1 and 8 texts per call (``--batch-sizes``), with labels encoded per call
  (``plain``) and with the used entities' label embeddings precomputed once
  (``precomputed``).
- Served: the plugin's server at 1, 8 and 32 concurrent clients; the label-vector cache's
  hits and misses from the server's ``/metrics`` for the cold pass (every text once) and for
  each measured point.

Results: ``docs/benchmarks/<machine>/<date>-<commit>-<plugin>-linking.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from vllm_factory.testing import bench_report
from vllm_factory.testing.bench import (
    machine_info,
    machine_name,
    repo_root,
    versions,
    word_pool,
    word_stream,
)
from vllm_factory.testing.gliner.bench import bench_checkpoint
from vllm_factory.testing.gliner.glinker import L1_LABELS, TEMPLATE, linking_inputs
from vllm_factory.testing.gliner.references import CORPUS, GLiNERReference, glinker_env
from vllm_factory.testing.loadgen import Workload, closed_loop
from vllm_factory.testing.refenv import SCRIPTS
from vllm_factory.testing.server import VllmServer

logger = logging.getLogger(__name__)

THRESHOLD = 0.5
MENTIONS = 8  # per text
DISTRACTORS = 3  # other entities per mention, besides its own two
RECORD_FIELDS = ("entity_id", "label", "description", "entity_type", "popularity", "aliases")
MAX_LENGTH = 512  # words per text (glinker's max_length)
METRIC = re.compile(r"^vllm_factory:gliner_label_cache_(\w+?)(?:_total)?\s+([0-9.eE+-]+)$")


def workload(
    corpus_texts: list[str], entities: list[dict], count: int = 32, seed: int = 0
) -> list[dict]:
    """``count`` texts of 100 - 200 seeded words from the corpus's words (and the bench's
    docstring words, as the GLiNER bench makes its texts), each with ``MENTIONS`` entity names
    put in at random places: the mentions an L1 would find. Candidates per mention, as an L2
    returns them: the entities of that name (its two senses) and ``DISTRACTORS`` others."""
    import random

    rng = random.Random(seed)
    pool = word_pool(corpus_texts)
    by_name: dict[str, list[dict]] = {}
    for entity in entities:
        for name in (entity["label"], *entity["aliases"]):
            by_name.setdefault(name, []).append(entity)
    named = [entity for entity in entities if not entity["aliases"]]  # first senses
    items = []
    for _ in range(count):
        words = word_stream(pool, rng.randint(100, 200), rng)
        picks = rng.sample(named, MENTIONS)
        places = dict(zip(sorted(rng.sample(range(len(words)), MENTIONS)), picks))
        text, mentions, candidates = "", [], []
        for i, word in enumerate(words):
            text += " " if text else ""
            if i in places:
                name = places[i]["label"]
                mentions.append({"start": len(text), "end": len(text) + len(name)})
                text += name
                own = by_name[name]
                candidates += [{k: e[k] for k in RECORD_FIELDS}
                               for e in (*own, *rng.sample(entities, DISTRACTORS))]  # fmt: skip
            else:
                text += word
        items.append({"text": text, "mentions": mentions, "candidates": candidates})
    return items


def cache_counts(url: str) -> dict[str, float]:
    """The label cache's counters on the server's ``/metrics`` (hits, misses, evictions,
    size, capacity)."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    counts: dict[str, float] = {}
    for line in text.splitlines():
        match = METRIC.match(line)
        if match:
            counts[match.group(1)] = counts.get(match.group(1), 0.0) + float(match.group(2))
    return counts


def settled_counts(url: str) -> dict[str, float]:
    """Counters once the engine has written its latest figures (at most once a second)."""
    time.sleep(1.5)
    return cache_counts(url)


def cache_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    hits = after.get("hits", 0) - before.get("hits", 0)
    misses = after.get("misses", 0) - before.get("misses", 0)
    return {"hits": int(hits), "misses": int(misses),
            "hit_rate": round(hits / (hits + misses), 4) if hits + misses else None,
            "size": after.get("size"), "capacity": after.get("capacity")}  # fmt: skip


def request_bodies(model: str, items: list[dict]) -> list[dict]:
    """One ``POST /pooling`` body per workload text (glinker's L3 settings)."""
    return [
        {"model": model, "data": {
            "text": item["text"], "template": TEMPLATE, "threshold": THRESHOLD,
            "max_len": MAX_LENGTH, "input_spans": [item["mentions"]],
            "candidates": [{"id": c["entity_id"], "label": c["label"],
                            "description": c["description"]} for c in item["candidates"]]}}
        for item in items
    ]  # fmt: skip


def run_reference(checkpoint: Path, items: list[dict], args: argparse.Namespace, tmp: Path):
    inputs_file, out = tmp / "inputs.json", tmp / "glinker.json"
    inputs = {"workload": items, "template": TEMPLATE, "threshold": THRESHOLD,
              "max_length": MAX_LENGTH}  # fmt: skip
    inputs_file.write_text(json.dumps(inputs), encoding="utf-8")
    env = glinker_env().ensure()
    started = time.monotonic()
    subprocess.run(
        [str(env.python), str(SCRIPTS / "glinker_link_bench.py"), "--checkpoint", str(checkpoint),
         "--inputs", str(inputs_file), "--out", str(out), "--batch-sizes", args.batch_sizes,
         "--warmup", str(args.warmup), "--requests", str(args.requests),
         "--device", args.device],
        check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    raw = json.loads(out.read_text(encoding="utf-8"))
    raw["seconds"] = time.monotonic() - started
    first = raw["runs"]["plain"][0]
    raw["links_per_request"] = first["links"] / len(first["latencies_s"])
    for runs in raw["runs"].values():
        for run in runs:
            latencies = sorted(run.pop("latencies_s"))
            run["requests"] = len(latencies)
            run["req_per_s"] = len(latencies) / run["wall_seconds"]
            run["p50_ms"] = 1000 * latencies[len(latencies) // 2]
    return raw


def run_served(checkpoint: Path, items: list[dict], args) -> dict:
    with VllmServer(
        checkpoint, dtype=args.dtype, max_model_len=512, worker_in_engine=False
    ) as server:
        bodies = request_bodies(server.model, items)
        url = f"{server.url}/pooling"
        start = settled_counts(server.url)
        # Cold pass: every text once (each new candidate label is a miss).
        cold = asyncio.run(closed_loop(Workload(url, lambda i: bodies[i], len(bodies)), 1))
        counts = settled_counts(server.url)
        result: dict[str, Any] = {"startup_seconds": server.startup_seconds,
                                  "cold": {**cold.to_dict(), "cache": cache_delta(start, counts)},
                                  "points": []}  # fmt: skip
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            requests = max(args.requests, 4 * concurrency)
            work = Workload(
                url, lambda i: bodies[i % len(bodies)], requests, warmup=min(concurrency, 8)
            )
            before = counts
            point = asyncio.run(closed_loop(work, concurrency))
            counts = settled_counts(server.url)
            result["points"].append({**point.to_dict(), "cache": cache_delta(before, counts)})
        result["links_per_request"] = _links_per_request(server, bodies)
    return result


def _links_per_request(server: VllmServer, bodies: list[dict]) -> float:
    links = 0
    for body in bodies:
        response = server.pooling(body["data"])
        response.raise_for_status()
        links += len(response.json()["data"])  # one text: its entities
    return links / len(bodies)


def markdown(report: dict) -> str:
    ref, served = report["reference"], report["served"]
    lines = [
        f"# {report['plugin']} linking bench ({report['machine']['name']}, {report['dtype']})",
        "",
        (
            f"Workload: {report['workload']['requests_distinct']} texts "
            f"({report['workload']['words_per_text']:.0f} words, "
            f"{report['workload']['mentions_per_text']:.1f} mentions, "
            f"{report['workload']['candidates_per_text']:.1f} candidates per text), knowledge "
            f"base {report['workload']['knowledge_base']} entities; threshold {THRESHOLD}."
        ),
        "",
        "| what | setting | req/s | p50 ms | label cache hit rate |",
        "|---|---|---:|---:|---:|",
    ]
    if ref:
        for mode, runs in ref["runs"].items():
            for run in runs:
                lines.append(
                    f"| glinker L3 in process ({mode}) | {run['batch_size']} per call | "
                    f"{run['req_per_s']:.2f} | {run['p50_ms']:.0f} | - |"
                )
    cold = served["cold"]
    lines.append(
        f"| served, cold pass | 1 client | {cold['req_per_s']:.2f} | {cold['p50_ms']:.0f} | "
        f"{cold['cache']['hit_rate']} |"
    )
    for point in served["points"]:
        lines.append(
            f"| served | {point['concurrency']} clients | {point['req_per_s']:.2f} | "
            f"{point['p50_ms']:.0f} | {point['cache']['hit_rate']} |"
        )
    if ref and ref["settings"].get("precompute_seconds") is not None:
        lines += ["", (f"glinker's precompute of the label embeddings of the "
                       f"{ref['settings']['precomputed_entities']} entities the workload uses: "
                       f"{ref['settings']['precompute_seconds']:.1f} s (not in its req/s).")]  # fmt: skip
    lines += ["", f"Links per request: served {served['links_per_request']:.2f}"
                  + (f", glinker {ref['links_per_request']:.2f}" if ref else "")]  # fmt: skip
    factors = report.get("factors") or {}
    if factors:
        lines += ["", "Served peak over glinker: " + ", ".join(
            f"{k} {v:.2f}x" for k, v in factors.items())]  # fmt: skip
    return "\n".join(lines) + "\n"


def chart(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, values = [], []
    for mode, runs in (report["reference"] or {}).get("runs", {}).items():
        for run in runs:
            names.append(f"glinker {mode}\n{run['batch_size']}/call")
            values.append(run["req_per_s"])
    for point in report["served"]["points"]:
        names.append(f"served\n{point['concurrency']} clients")
        values.append(point["req_per_s"])
    fig, ax = plt.subplots(figsize=(max(6, len(names) * 1.1), 4))
    ax.bar(range(len(names)), values, color=["#999"] * (len(names) - len(
        report["served"]["points"])) + ["#2a6"] * len(report["served"]["points"]))  # fmt: skip
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.set_ylabel("linking requests / s")
    ax.set_title(f"{report['plugin']} linking ({report['machine']['name']}, {report['dtype']})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plugin", default="deberta_gliner")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype")
    ap.add_argument("--quick", action="store_true", help="fewer requests per point")
    ap.add_argument("--requests", type=int)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--concurrency", default="1,8,32")
    # glinker's L3 makes one model call per text whatever it is given: more texts per call
    # only show that (see the results), so 1 and 8 by default.
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--entities", type=int, default=400, help="knowledge base size")
    ap.add_argument("--checkpoint", type=Path, help="a prepared bi-encoder checkpoint")
    ap.add_argument("--skip-reference", action="store_true")
    ap.add_argument("--out-dir", type=Path)
    ap.add_argument("--machine")
    args = ap.parse_args(argv)
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    args.requests = args.requests or (32 if args.quick else 96)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    started = time.monotonic()

    package = repo_root() / "packages" / "models" / args.plugin
    reference = GLiNERReference(package / "reference" / "build_checkpoint.py", "bi-encoder")
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    entities = linking_inputs(corpus, args.entities, long_descriptions=False)["entities"]
    items = workload(corpus["texts"], entities)
    checkpoint = args.checkpoint or bench_checkpoint(
        reference, args.plugin, corpus["texts"], L1_LABELS, device=args.device, dtype=args.dtype
    )
    ref = None
    if not args.skip_reference:
        with tempfile.TemporaryDirectory(prefix="link-bench-") as tmp:
            ref = run_reference(checkpoint, items, args, Path(tmp))
    served = run_served(checkpoint, items, args)
    # Every text equally often (requests a multiple of the texts): the same links expected.
    same_texts = ref is not None and args.requests % len(items) == 0
    if same_texts and abs(served["links_per_request"] - ref["links_per_request"]) > 1e-9:
        logger.warning(
            "served links per request %.3f, glinker's %.3f: the two do not agree",
            served["links_per_request"], ref["links_per_request"],
        )  # fmt: skip

    info = machine_info(args.device)
    name = args.machine or machine_name(info)
    texts = [item["text"] for item in items]
    report: dict[str, Any] = {
        "benchmark": "vllm-factory linking bench",
        "plugin": args.plugin,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {**info, "name": name},
        "versions": versions(["gliner", "glinker"]),
        "dtype": args.dtype,
        "checkpoint": str(checkpoint),
        "calibration": _calibration(checkpoint),
        "workload": {
            "requests_distinct": len(items),
            "knowledge_base": len(entities),
            "words_per_text": sum(len(t.split()) for t in texts) / len(texts),
            "mentions_per_text": sum(len(i["mentions"]) for i in items) / len(items),
            "candidates_per_text": sum(len(i["candidates"]) for i in items) / len(items),
            "distinct_candidates": len({c["entity_id"] for i in items for c in i["candidates"]}),
            "template": TEMPLATE,
        },
        "reference": ref,
        "served": served,
    }
    peak = max(point["req_per_s"] for point in served["points"])
    if ref:
        report["factors"] = {}
        for mode, runs in ref["runs"].items():
            bs1 = next(run for run in runs if run["batch_size"] == 1)
            best = max(runs, key=lambda run: run["req_per_s"])
            report["factors"][f"vs {mode} bs1"] = peak / bs1["req_per_s"]
            report["factors"][f"vs {mode} best"] = peak / best["req_per_s"]
    report["total_seconds"] = time.monotonic() - started
    out = args.out_dir / name if args.out_dir else bench_report.results_folder(repo_root(), name)
    out.mkdir(parents=True, exist_ok=True)
    stem = bench_report.record_stem(f"{args.plugin}-linking{'-quick' if args.quick else ''}")
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (out / f"{stem}.md").write_text(markdown(report), encoding="utf-8")
    chart(report, out / f"{stem}.png")
    print(markdown(report))
    return report


def _calibration(checkpoint: Path) -> dict | None:
    path = checkpoint.parent / "gliner" / "calibration.json"
    return json.loads(path.read_text()) if path.exists() else None


if __name__ == "__main__":
    main()
