"""Compare two .npz files written by colbert_encode.py (token ids, counts and vectors).

    python colbert_compare.py A.npz B.npz [--atol 1e-5]

Exits 1 when token ids or counts differ, or when a vector differs by more than --atol.
Needs only numpy, so it runs in any of the venvs.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

PARTS = ("query", "document")


def items(z: np.lib.npyio.NpzFile, part: str, key: str) -> list[np.ndarray]:
    """Split a flat per-part array back into per-item arrays."""
    off = z[f"{part}_offsets"] if key == "vectors" else z[f"{part}_tok_offsets"]
    flat = z[f"{part}_{key}"]
    return [flat[off[i] : off[i + 1]] for i in range(len(off) - 1)]


def compare(a: np.lib.npyio.NpzFile, b: np.lib.npyio.NpzFile, atol: float) -> bool:
    """Print a per-part summary; return True when A and B agree."""
    ok = True
    for part in PARTS:
        assert (a[f"{part}_ids"] == b[f"{part}_ids"]).all(), "different corpora"
        va, vb = items(a, part, "vectors"), items(b, part, "vectors")
        ids_a, ids_b = items(a, part, "input_ids"), items(b, part, "input_ids")
        am_a, am_b = items(a, part, "attention_mask"), items(b, part, "attention_mask")
        kept_a, kept_b = items(a, part, "kept"), items(b, part, "kept")
        n_ids = sum(not np.array_equal(x, y) for x, y in zip(ids_a, ids_b, strict=True))
        n_am = sum(not np.array_equal(x, y) for x, y in zip(am_a, am_b, strict=True))
        n_kept = sum(not np.array_equal(x, y) for x, y in zip(kept_a, kept_b, strict=True))
        n_count = sum(len(x) != len(y) for x, y in zip(va, vb, strict=True))
        max_abs, min_cos = 0.0, 1.0
        for x, y in zip(va, vb, strict=True):
            if len(x) == len(y) and len(x):
                max_abs = max(max_abs, float(np.abs(x - y).max()))
                cos = (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)
                min_cos = min(min_cos, float(cos.min()))
        print(
            f"{part}: items={len(va)} tokens A={sum(map(len, va))} B={sum(map(len, vb))} "
            f"count_mismatch={n_count} input_ids_mismatch={n_ids} "
            f"attention_mask_mismatch={n_am} kept_mismatch={n_kept} "
            f"max_abs_diff={max_abs:.3g} min_token_cosine={min_cos:.8f}"
        )
        ok &= n_count == 0 and n_ids == 0 and n_kept == 0 and max_abs <= atol
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--atol", type=float, default=1e-5)
    args = ap.parse_args()
    with np.load(args.a) as a, np.load(args.b) as b:
        for name, z in (("A", a), ("B", b)):
            meta = json.loads(str(z["meta_json"]))
            print(f"{name}: {meta['library']} bs={meta['batch_size']} {meta['versions']}")
        ok = compare(a, b, args.atol)
    print("IDENTICAL within atol" if ok else "DIFFERENT")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
