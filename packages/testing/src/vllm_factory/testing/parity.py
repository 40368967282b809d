"""Comparisons between served outputs and reference outputs, and what "matches" means.

The reference outputs are always the reference library's, in fp32 on the CPU. A server in
fp32 must match them to float noise (:data:`TOLERANCES`). In bf16 the yardstick is what bf16
costs the reference library itself: every reference folder also holds the library's own bf16
run (on the CPU, same inputs), and a bf16 server may land at most :data:`BF16_FACTOR` times as
far from the fp32 outputs as that run does, and never needs to be closer than the fixed bf16
floor. A server whose weights vLLM quantizes (``--quantization``, e.g. fp8) is held to the same
yardstick with :data:`QUANTIZED_FACTOR` and its own floors (:data:`QUANTIZED`). Every parity
test reads its limits through :func:`tolerance` and compares counts of changed decisions with
:func:`library_factor` times the library's own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from vllm_factory.testing.report import record
from vllm_factory.testing.server import session_quantization


@dataclass(frozen=True)
class Tolerance:
    """How close served outputs must be to the fp32 CPU reference at one serving dtype."""

    min_cosine: float  # per vector (per token for multi-vector models)
    vector_abs: float  # max |served - reference| of a unit-norm sentence vector's entries
    score: float  # max |served - reference| of a probability (GLiNER span x label scores)
    # max |served - reference| of a late-interaction (MaxSim) score, per query token: a score
    # sums one dot product per query token, so vector noise adds up with the query's length
    maxsim: float
    margin: float  # a score this close to a decision threshold may land on either side of it
    tie: float  # overlapping candidate spans this close may be ranked either way


@dataclass(frozen=True)
class LibraryError:
    """How far the reference library's own bf16 run lands from its fp32 output."""

    min_cosine: float | None = None  # lowest cosine, vector for vector
    max_abs_diff: float | None = None  # largest |bf16 - fp32| of an output value
    decision_flips: int | None = None  # items where a thresholded decision changed


TOLERANCES = {
    "float32": Tolerance(
        min_cosine=0.99999, vector_abs=1e-4, score=1e-4, maxsim=1e-6, margin=1e-3, tie=2e-5
    ),
    "bfloat16": Tolerance(
        min_cosine=0.999, vector_abs=1e-2, score=2e-2, maxsim=2e-3, margin=1e-2, tie=1e-2
    ),
}
# A bf16 server may be this many times as far from fp32 as the library's own bf16 run: two
# bf16 implementations round differently (fused kernels, other summation orders).
BF16_FACTOR = 1.5
# A server with quantized weights (``--quantization``) against the library's own bf16 run:
# GLiNER decisions changed at most twice as often as gliner's bf16 run changes them, ColBERT
# vectors at cosine 0.995 or more (the bounds asked of fp8 weights).
QUANTIZED_FACTOR = 2.0
QUANTIZED = Tolerance(
    min_cosine=0.995, vector_abs=5e-2, score=5e-2, maxsim=1e-2, margin=5e-2, tie=5e-2
)


def library_factor(quantization: str | None = None) -> float:
    """How many times the reference library's own error in the server's dtype the server may
    show (scores, vectors, changed decisions): :data:`QUANTIZED_FACTOR` for a server that
    quantizes its weights (``quantization``, by default this session's), else
    :data:`BF16_FACTOR`."""
    return QUANTIZED_FACTOR if _quantized(quantization) else BF16_FACTOR


def _quantized(quantization: str | None) -> bool:
    """``quantization`` as given (``""``: none), else this session's."""
    return bool(quantization if quantization is not None else session_quantization())


def tolerance(
    dtype: str, library: LibraryError | None = None, quantization: str | None = None
) -> Tolerance:
    """The tolerance for a server started with ``--dtype dtype`` (and below fp32, the only
    dtypes vLLM quantizes for, ``--quantization``: ``quantization``, by default this
    session's); below fp32, widened to :func:`library_factor` times the ``library``'s own
    error in that dtype where that is larger."""
    try:
        base = TOLERANCES[dtype]
    except KeyError:
        raise ValueError(f"no parity tolerance for dtype {dtype!r}: {sorted(TOLERANCES)}") from None
    if dtype == "float32":
        return base
    quantized = _quantized(quantization)
    if quantized:
        base = QUANTIZED
    if library is None:
        return base
    factor = library_factor(quantization)
    min_cosine, score, vector_abs, maxsim = (
        base.min_cosine,
        base.score,
        base.vector_abs,
        base.maxsim,
    )
    if library.min_cosine is not None:
        min_cosine = min(min_cosine, 1 - factor * (1 - library.min_cosine))
    if library.max_abs_diff is not None:  # in the unit of whatever output the caller measured
        score = max(score, factor * library.max_abs_diff)
        vector_abs = max(vector_abs, factor * library.max_abs_diff)
        maxsim = max(maxsim, factor * library.max_abs_diff)
    # A decision flips only where the score moved past the threshold, and two candidates swap
    # only where each moved by up to ``score``.
    margin, tie = max(base.margin, score), max(base.tie, 2 * score)
    return Tolerance(min_cosine, vector_abs, score, maxsim, margin=margin, tie=tie)


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


def check_vectors(server, name: str, key: str, served, expected, own_run=None) -> None:
    """Served token vectors vs ``expected`` (fp32 reference) for a multi-vector model; below
    fp32 the limit follows ``own_run``, the reference library's own run in the server's dtype.
    Prints, records (``name``/``key`` in the session report) and asserts."""
    own = None
    if server.dtype != "float32":
        assert own_run is not None, f"no {server.dtype} run of the reference library"
        own = compare_token_vectors(own_run, expected)
        assert own.count_mismatches == []
    limit = tolerance(server.dtype, own and LibraryError(min_cosine=own.min_cosine))
    parity = compare_token_vectors(served, expected)
    print(f"\n{key} ({server.dtype}): {parity.summary()}"
          + (f"; the library's own run: min cosine {own.min_cosine:.8f}" if own else ""))  # fmt: skip
    record(name, "parity", key, {
        "dtype": server.dtype, "items": parity.items,
        "token_count_mismatches": len(parity.count_mismatches),
        "min_cosine": parity.min_cosine, "max_abs_diff": parity.max_abs_diff,
        "threshold": limit.min_cosine,
        "library_bf16_min_cosine": own.min_cosine if own else None,
    })  # fmt: skip
    assert parity.count_mismatches == [], f"{key}: token counts differ from the reference"
    assert parity.min_cosine >= limit.min_cosine, key
