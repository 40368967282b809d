"""What the API process spends writing a vector answer: vLLM's own steps for an IOProcessor's
data (``IOProcessorResponse(...).model_dump()`` and the ``/pooling`` response class's render),
for the vectors as a list (a family's answer before ``json_array``, and offline) and as an
array (what ``json_array`` hands the server's orjson renderer), with base64 beside them.

    python -m vllm_factory.testing.render_bench --out docs/benchmarks/cpu-2core --tag TAG

Writes ``<out>/<tag>.json`` and ``<out>/<tag>.md``: per answer shape, milliseconds per answer
(median of ``--rounds`` rounds of ``--repeat`` answers) and its bytes.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

# (name, vectors per item, items per answer): a ColBERT document and query at the families'
# lengths, eight documents in one request, EmbeddingGemma's 768-d vector for 1 and 32 texts.
SHAPES = [
    ("colbert document 512 x 128", (512, 128), 1),
    ("colbert 8 documents 512 x 128", (512, 128), 8),
    ("colbert query 32 x 128", (32, 128), 1),
    ("embeddinggemma 1 x 768", (768,), 1),
    ("embeddinggemma 32 x 768", (768,), 32),
]
FORMS = ("list", "array", "base64")


def answer(form: str, vectors: list[np.ndarray]) -> Callable[[], bytes]:
    """The answer's bytes as vLLM's server makes them for data built in ``form``."""
    from vllm.entrypoints.pooling.pooling.protocol import IOProcessorResponse
    from vllm.entrypoints.pooling.utils import get_json_response_cls
    from vllm_factory.heads.colbert.vectors import encode_vectors

    renderer = get_json_response_cls()
    # FastAPI 0.136 deprecates ORJSONResponse in favour of response models; vLLM still uses it
    warnings.filterwarnings("ignore", message="ORJSONResponse is deprecated")

    def item(values: np.ndarray) -> dict:
        if form == "base64":
            return encode_vectors(values.reshape(len(values), -1), "base64")
        data = values.tolist() if form == "list" else np.ascontiguousarray(values)
        return {"embeddings": data, "num_tokens": len(values)}

    def render() -> bytes:
        data = [item(values) for values in vectors]
        return renderer(content=IOProcessorResponse(request_id="r", data=data).model_dump()).body

    return render


def timed(render: Callable[[], bytes], repeat: int, rounds: int) -> tuple[float, int]:
    size = len(render())
    per_round = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(repeat):
            render()
        per_round.append((time.perf_counter() - started) / repeat * 1e3)
    return statistics.median(per_round), size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    from vllm.entrypoints.pooling.utils import get_json_response_cls

    rng = np.random.default_rng(0)
    rows = []
    for name, shape, items in SHAPES:
        vectors = [rng.standard_normal(shape).astype(np.float32) for _ in range(items)]
        row = {"answer": name, "items": items, "shape": list(shape)}
        for form in FORMS:
            ms, size = timed(answer(form, vectors), args.repeat, args.rounds)
            row[form] = {"ms": round(ms, 3), "bytes": size}
        rows.append(row)
    result = {
        "benchmark": "render_bench",
        "renderer": get_json_response_cls().__name__,
        "machine": {"platform": platform.platform(), "processor": platform.processor()},
        "repeat": args.repeat,
        "rounds": args.rounds,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.tag}.json").write_text(json.dumps(result, indent=2) + "\n")
    title = f"{result['renderer']}, median of {args.rounds} x {args.repeat}"
    lines = [
        f"# Writing a vector answer ({title})",
        "",
        "| answer | list ms | array ms | list / array | base64 ms | list KB | array KB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lst, arr, b64 = row["list"], row["array"], row["base64"]
        lines.append(
            f"| {row['answer']} | {lst['ms']:.3f} | {arr['ms']:.3f} | "
            f"{lst['ms'] / arr['ms']:.1f}x | {b64['ms']:.3f} | {lst['bytes'] / 1e3:.0f} | "
            f"{arr['bytes'] / 1e3:.0f} |"
        )
    (args.out / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
