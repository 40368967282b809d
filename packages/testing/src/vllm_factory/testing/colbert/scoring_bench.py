"""Documents scored per second: scoring inside the server vs fetching vectors + client MaxSim.

One query against ``--documents`` documents of (up to) ``--tokens`` tokens each, on one real
vLLM server with a ColBERT plugin, the two ways a client can get scores:

- ``server``: ``POST /pooling {"query", "documents"}``: the server encodes and scores;
- ``client-base64`` / ``client-float``: ``POST /pooling {"text": documents}`` (plus the
  query) with base64 or JSON-float vectors, then MaxSim in numpy on the client.

Each way runs ``--requests`` times at every ``--concurrency`` (closed loop), the same texts;
documents per second = documents scored / wall time. Writes ``<out>/<tag>.json`` and
``<out>/<tag>.md``.

    python -m vllm_factory.testing.colbert.scoring_bench --checkpoint DIR \\
        --config-format colbert --out docs/benchmarks/cpu-2core
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import json
import platform
import random
import statistics
import time
from pathlib import Path

import numpy as np

VOCABULARY = (
    "late interaction keeps one vector per token so that every query token finds its best match "
    "in the document and the scores of those matches are summed into a relevance score for "
    "retrieval systems which rank passages by how well they answer a question about science "
    "history cooking travel sport music law medicine finance and the weather in many cities"
)


def documents(count: int, tokens: int, tokenizer, seed: int = 0) -> list[str]:
    """``count`` texts of at most ``tokens`` tokens each (special tokens included; a word of
    several tokens may stop one a little short) for ``tokenizer``, from a fixed vocabulary."""
    rng, vocabulary = random.Random(seed), VOCABULARY.split()

    def length(words: list[str]) -> int:
        return len(tokenizer(" ".join(words))["input_ids"])

    texts = []
    for _ in range(count):
        words = [rng.choice(vocabulary) for _ in range(2 * tokens)]
        while length(words) > tokens:  # shrink in proportion, then word by word
            words = words[: max(1, min(len(words) - 1, len(words) * tokens // length(words)))]
        while length(words + [word := rng.choice(vocabulary)]) <= tokens:
            words.append(word)
        texts.append(" ".join(words))
    return texts


def client_maxsim(query: np.ndarray, docs: list[np.ndarray]) -> list[float]:
    return [float((query @ d.T).max(axis=1).sum()) for d in docs]


def decode(item: dict | list) -> np.ndarray:
    """One text's answer: its float vectors, or an item (float lists or float32 base64)."""
    if isinstance(item, list):
        return np.asarray(item, dtype=np.float32)
    if isinstance(item["embeddings"], str):
        raw = base64.b64decode(item["embeddings"])
        return np.frombuffer(raw, dtype="<f4").reshape(item["num_tokens"], item["dim"])
    return np.asarray(item["embeddings"], dtype=np.float32)


def one_request(server, way: str, query: str, docs: list[str]) -> list[float]:
    if way == "server":
        response = server.pooling({"query": query, "documents": docs}, timeout=600)
        response.raise_for_status()
        return response.json()["data"]["scores"]
    encoding = "base64" if way == "client-base64" else "float"
    body = {"text": query, "is_query": True, "encoding_format": encoding}
    q = server.pooling(body, timeout=600)
    d = server.pooling({"text": docs, "encoding_format": encoding}, timeout=600)
    q.raise_for_status()
    d.raise_for_status()
    return client_maxsim(decode(q.json()["data"]), [decode(i) for i in d.json()["data"]])


def measure(server, way: str, query: str, docs: list[str], requests: int, clients: int) -> dict:
    latencies: list[float] = []

    def timed(_: int) -> list[float]:
        started = time.perf_counter()
        scores = one_request(server, way, query, docs)
        latencies.append(time.perf_counter() - started)
        return scores

    one_request(server, way, query, docs)  # warm-up
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(timed, range(requests)))
    wall = time.perf_counter() - started
    return {
        "way": way, "clients": clients, "requests": requests,
        "documents_per_s": requests * len(docs) / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "scores": results[0],
    }  # fmt: skip


def gpu() -> tuple[str, str | None]:
    """("cuda", its name) where the server's GPU is visible to this process, else ("cpu", None)."""
    import torch

    if torch.cuda.is_available():
        return "cuda", torch.cuda.get_device_name(0)
    return "cpu", None


def main(argv: list[str] | None = None) -> int:
    from vllm_factory.testing.bench import machine_info
    from vllm_factory.testing.server import VllmServer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--config-format", default="colbert")
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--ways", default="server,client-base64,client-float")
    parser.add_argument("--server-env", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--server-arg", action="append", default=[])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--tag", default="scoring")
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.server_env)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    docs = documents(args.documents, args.tokens, tokenizer)
    lengths = [len(tokenizer(d)["input_ids"]) for d in docs]
    query = "how does late interaction score a passage about science?"
    extra = ["--config-format", args.config_format, *args.server_arg]
    rows = []
    with VllmServer(
        args.checkpoint, extra_args=extra, env=env, max_model_len=1024, worker_in_engine=False
    ) as server:
        for clients in map(int, args.concurrency.split(",")):
            for way in args.ways.split(","):
                rows.append(measure(server, way, query, docs, args.requests, clients))
                print(f"{way:14} clients {clients}: {rows[-1]['documents_per_s']:8.1f} docs/s, "
                      f"p50 {rows[-1]['p50_ms']:.0f} ms", flush=True)  # fmt: skip
        startup = server.startup_seconds
    reference = np.asarray(rows[0]["scores"])
    for row in rows:  # the ways must agree on the scores, or the comparison means nothing
        row["max_abs_diff_vs_first"] = float(
            np.abs(np.asarray(row.pop("scores")) - reference).max()
        )
    result = {
        "machine": {**machine_info(*gpu()), "python": platform.python_version()},
        "checkpoint": Path(args.checkpoint).name, "documents": args.documents,
        "tokens_per_document": [min(lengths), max(lengths)], "server_env": env,
        "server_args": extra,
        "server_startup_s": startup, "rows": rows,
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.tag}.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        f"# Scoring: 1 query x {args.documents} documents of {args.tokens} tokens",
        "",
        f"{result['machine']['gpu'] or result['machine']['cpu_model']}; server flags `{' '.join(extra)}`, env `{env}`; {args.requests} requests per point.",
        "",
        "| way | clients | documents / s | p50 ms | max abs diff of scores vs server |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {r['way']} | {r['clients']} | {r['documents_per_s']:.1f} | {r['p50_ms']:.0f} | "
            f"{r['max_abs_diff_vs_first']:.1e} |"
            for r in rows
        ),
        "",
    ]
    (args.out / f"{args.tag}.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
