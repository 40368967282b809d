"""Writes ``quantize_expected.npz``: inputs and sentence-transformers' ``quantize_embeddings``
outputs that ``test_quantize.py`` compares ``vllm_factory.core.quantize`` against.

Run in a venv with sentence-transformers 6.2 (the ColBERT kit's ``requirements-st.txt``):
``python quantize_reference.py``; it rewrites the file beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sentence_transformers.util import quantize_embeddings

PRECISIONS = ("int8", "uint8", "binary", "ubinary")


def main() -> None:
    rng = np.random.default_rng(0)
    arrays: dict[str, np.ndarray] = {}
    # Unit vectors of 13 dimensions (not a multiple of 8: packbits pads), one constant column
    # (a zero-width range), and values at a bucket edge.
    rows = rng.standard_normal((40, 13)).astype(np.float32)
    rows[:, 5] = 0.25
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    arrays["rows"] = rows
    ranges = np.vstack((np.full(13, -0.4), np.full(13, 0.3))).astype(np.float32)
    arrays["ranges"] = ranges
    for precision in PRECISIONS:
        arrays[f"own_{precision}"] = quantize_embeddings(rows, precision)
        arrays[f"given_{precision}"] = quantize_embeddings(rows, precision, ranges=ranges)
    # Multi-vector: three matrices (one empty) calibrated together.
    sizes = (7, 0, 12)
    matrices = [rng.standard_normal((n, 16)).astype(np.float32) for n in sizes]
    arrays["sizes"] = np.array(sizes)
    arrays["matrices"] = np.concatenate(matrices)
    for precision in PRECISIONS:
        out = quantize_embeddings(matrices, precision)
        arrays[f"multi_{precision}"] = np.concatenate(out)
    np.savez(Path(__file__).with_name("quantize_expected.npz"), **arrays)


if __name__ == "__main__":
    main()
