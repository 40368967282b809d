"""PyLate's late-interaction scores of the parity corpus (runs in the PyLate venv).

    python colbert_score.py --vectors ref-pylate.npz [--bf16 ref-pylate-bf16.npz] --out FILE.npz

For every (query, document) of the corpus: ``pylate.scores.colbert_scores`` of PyLate's own
vectors for the two texts, one document per call (no padding, so no zero vectors take part in
the max). ``scores`` ``[queries, documents]`` from the fp32 vectors, ``scores_bf16`` from the
library's own bf16 run when given.
"""

from __future__ import annotations

import argparse
import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch


def split(data, part: str) -> list[torch.Tensor]:
    offsets, vectors = data[f"{part}_offsets"], data[f"{part}_vectors"]
    return [torch.from_numpy(vectors[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)]


def scores(data) -> np.ndarray:
    from pylate.scores import colbert_scores

    queries, documents = split(data, "query"), split(data, "document")
    out = np.zeros((len(queries), len(documents)), dtype=np.float64)
    for i, query in enumerate(queries):
        for j, document in enumerate(documents):
            out[i, j] = float(colbert_scores(query[None], document[None], backend="torch")[0, 0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vectors", required=True, type=Path)
    ap.add_argument("--bf16", type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    arrays = {"scores": scores(np.load(args.vectors))}
    if args.bf16 is not None:
        arrays["scores_bf16"] = scores(np.load(args.bf16))
    meta = {"versions": {lib: version(lib) for lib in ("pylate", "torch")}}
    np.savez(args.out, meta_json=np.array(json.dumps(meta)), **arrays)


if __name__ == "__main__":
    main()
