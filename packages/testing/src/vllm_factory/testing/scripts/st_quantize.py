"""sentence-transformers' ``quantize_embeddings`` on served float vectors (reference venv side).

``python st_quantize.py IN.npz OUT.npz``: IN holds jobs ``0``, ``1``, ...: ``<i>.matrices``
(every matrix's rows stacked), ``<i>.sizes`` (rows per matrix), ``<i>.precision``,
``<i>.single`` and optionally ``<i>.ranges``; a job's matrices go to the library as one list
(multi-vector: one calibration) or, when single, as one ``[n, dim]`` array. OUT holds
``<i>`` (the quantized rows, stacked in the same order). One process for every job: importing
the library takes seconds.
"""

from __future__ import annotations

import argparse

import numpy as np
from sentence_transformers.util import quantize_embeddings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("inputs")
    parser.add_argument("output")
    args = parser.parse_args()
    data = np.load(args.inputs)
    results = {}
    job = 0
    while f"{job}.matrices" in data:
        rows, precision = data[f"{job}.matrices"], str(data[f"{job}.precision"])
        ranges = data.get(f"{job}.ranges")
        if bool(data[f"{job}.single"]):
            out = quantize_embeddings(rows, precision, ranges=ranges)
        else:
            matrices = np.split(rows, np.cumsum(data[f"{job}.sizes"])[:-1])
            out = np.concatenate(quantize_embeddings(matrices, precision, ranges=ranges))
        results[str(job)] = out
        job += 1
    np.savez(args.output, **results)


if __name__ == "__main__":
    main()
