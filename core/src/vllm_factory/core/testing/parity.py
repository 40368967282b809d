"""Comparisons between served outputs and reference outputs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two ``[n, d]`` arrays."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    num = (a * b).sum(axis=-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return num / np.maximum(den, 1e-30)


@dataclass
class TokenParity:
    """How well a list of served per-token matrices matches the reference list."""

    items: int
    count_mismatches: list[int]
    min_cosine: float
    max_abs_diff: float

    def summary(self) -> str:
        return (
            f"{self.items} items, {len(self.count_mismatches)} token-count mismatches, "
            f"min per-token cosine {self.min_cosine:.8f}, max |diff| {self.max_abs_diff:.2e}"
        )


def compare_token_vectors(served: list[np.ndarray], reference: list[np.ndarray]) -> TokenParity:
    if len(served) != len(reference):
        raise ValueError(f"{len(served)} served items vs {len(reference)} reference items")
    mismatches, min_cos, max_diff = [], 1.0, 0.0
    for index, (ours, ref) in enumerate(zip(served, reference)):
        ours, ref = np.asarray(ours), np.asarray(ref)
        if ours.shape != ref.shape:
            mismatches.append(index)
            continue
        min_cos = min(min_cos, float(cosine_rows(ours, ref).min()))
        max_diff = max(max_diff, float(np.abs(ours - ref).max()))
    return TokenParity(len(served), mismatches, min_cos, max_diff)
