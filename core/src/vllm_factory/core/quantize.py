"""Compact vectors: scalar (int8 / uint8) and binary (binary / ubinary) quantization of float
embeddings in the API process, and the MaxSim scores of binary token vectors; NumPy only.

The numbers equal sentence-transformers' ``quantize_embeddings`` for the same vectors and the
same ranges (its tests pin them against the library):

- ``int8`` / ``uint8``: per dimension, ``min`` and ``max`` (``ranges``, shape ``[2, dim]``) split
  into 255 float32 steps (a zero-width range: step 1); a value's bucket is
  ``floor((value - min) / step)`` clipped to 0 - 255 (``uint8``), minus 128 for ``int8``. With no
  ranges, the minimum and maximum of the given rows (at least two).
- ``ubinary``: one bit per dimension, set where the value is > 0, packed eight to a byte, most
  significant bit first (``numpy.packbits``; the last byte zero-padded); ``binary``: the same
  byte minus 128, as int8.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import numpy as np

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
SCALAR_DTYPES = ("int8", "uint8")
BINARY_DTYPES = ("binary", "ubinary")
COMPACT_DTYPES = SCALAR_DTYPES + BINARY_DTYPES

NUMPY_DTYPES = {"int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}
MAX_CALIBRATION_DIM = 16384  # a bound on the request's lists, far above any served width


class CalibrationError(ValueError):
    """Ranges that cannot quantize these vectors (a 400 naming ``data.calibration``)."""


@contextlib.contextmanager
def calibration_refusal() -> Iterator[None]:
    """A :class:`CalibrationError` raised inside as the 400 naming ``data.calibration``."""
    try:
        yield
    except CalibrationError as error:
        from vllm_factory.core import compat  # vLLM's error type; this module stays vLLM-free

        raise compat.validation_error(f"data.calibration: {error}", "data.calibration") from None


def calibration_problem(calibration: Sequence[Sequence[float]]) -> str | None:
    """Why ``calibration`` (``[[min per dimension], [max per dimension]]``) is unusable, or
    None: two rows of one length, finite numbers, no minimum above its maximum."""
    if len(calibration) != 2:
        return "must be [[min per dimension], [max per dimension]] (two lists)"
    low, high = calibration
    if not low or len(low) != len(high):
        return "its min and max lists must be non-empty and of one length"
    if len(low) > MAX_CALIBRATION_DIM:  # checked before the model runs; the exact dimension after
        return f"more than {MAX_CALIBRATION_DIM} dimensions (no served model has as many)"
    if not all(math.isfinite(v) for v in (*low, *high)):
        return "must hold finite numbers only"
    for i, (a, b) in enumerate(zip(low, high)):
        if a > b:
            return f"dimension {i}: min {a} is above max {b}"
    return None


def ranges_of(vectors: np.ndarray) -> np.ndarray:
    """The ``[2, dim]`` per-dimension minimum and maximum of ``vectors`` (rows), as the library
    calibrates on the embeddings themselves; it refuses fewer than two rows."""
    if vectors.ndim != 2 or len(vectors) < 2:
        raise CalibrationError(
            "int8 / uint8 need per-dimension ranges: give data.calibration, or at least two "
            "vectors in the request to take them from"
        )
    return np.vstack((vectors.min(axis=0), vectors.max(axis=0)))


def quantize(vectors: np.ndarray, embed_dtype: str, ranges: np.ndarray | None = None) -> np.ndarray:
    """``vectors`` (float, ``[n, dim]`` or ``[dim]``) in ``embed_dtype``: one of
    :data:`COMPACT_DTYPES`. ``ranges`` (``[2, dim]``) for the scalar types; None: the vectors'
    own (:func:`ranges_of`)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if embed_dtype in BINARY_DTYPES:
        packed = np.packbits(vectors > 0, axis=-1)
        if embed_dtype == "ubinary":
            return packed
        return (packed.astype(np.int16) - 128).astype(np.int8)
    if embed_dtype not in SCALAR_DTYPES:
        raise ValueError(f"unknown compact dtype {embed_dtype!r}")
    dim = vectors.shape[-1]
    if len(vectors) == 0 and vectors.ndim == 2:
        return np.zeros((0, dim), dtype=NUMPY_DTYPES[embed_dtype])
    bounds = ranges_of(vectors) if ranges is None else np.asarray(ranges, dtype=np.float32)
    if bounds.shape != (2, dim):
        raise CalibrationError(f"holds {bounds.shape[-1]} dimensions; the vectors have {dim}")
    low = bounds[0]
    step = (bounds[1] - low) / np.float32(255)
    step = np.where(step == 0, np.float32(1), step)
    buckets = np.clip(np.floor((vectors - low) / step), 0, 255)
    if embed_dtype == "uint8":
        return buckets.astype(np.uint8)
    return (buckets - 128).astype(np.int8)


def quantize_all(
    matrices: Sequence[np.ndarray], embed_dtype: str, ranges: np.ndarray | None = None
) -> list[np.ndarray]:
    """Each ``[t_i, dim]`` matrix of one request in ``embed_dtype``, the scalar types sharing one
    calibration: ``ranges``, else those of all the matrices' rows together (as the library does
    for a list of multi-vector matrices)."""
    if embed_dtype in SCALAR_DTYPES and ranges is None:
        ranges = ranges_of(np.concatenate(matrices, axis=0))
    return [quantize(m, embed_dtype, ranges) for m in matrices]


def dequantize(buckets: np.ndarray, embed_dtype: str, ranges: np.ndarray) -> np.ndarray:
    """Scalar-quantized vectors back in float32 coordinates: each bucket's lower edge
    (``min + bucket * step``), where the library's rescoring puts them."""
    bounds = np.asarray(ranges, dtype=np.float32)
    step = (bounds[1] - bounds[0]) / np.float32(255)
    step = np.where(step == 0, np.float32(1), step)
    values = buckets.astype(np.float64) + (128 if embed_dtype == "int8" else 0)
    return (values * step + bounds[0]).astype(np.float32)


_POPCOUNT = np.array([i.bit_count() for i in range(256)], dtype=np.int32)


def hamming_similarity(query: np.ndarray, document: np.ndarray, dim: int) -> np.ndarray:
    """``[q, t]``: per token pair, the dimensions whose signs agree, ``dim - hamming distance``
    of their packed bits (``binary`` or ``ubinary``, ``[rows, ceil(dim / 8)]``; padding bits are
    0 on both sides, so never differ)."""
    q = query.view(np.uint8)
    d = document.view(np.uint8)
    differing = _POPCOUNT[np.bitwise_xor(q[:, None, :], d[None, :, :])].sum(axis=-1)
    return dim - differing


def binary_maxsim_scores(
    query: np.ndarray, documents: Sequence[np.ndarray], dim: int, embed_dtype: str
) -> list[float]:
    """MaxSim on Hamming similarity: per document, the sum over the query's packed token vectors
    of the best :func:`hamming_similarity` with any of its tokens (0 for a document with none).
    The ``binary`` form is read back as the bytes it was made from (+128)."""

    def as_bytes(packed: np.ndarray) -> np.ndarray:
        if embed_dtype == "binary":
            return (packed.astype(np.int16) + 128).astype(np.uint8)
        return packed

    q = as_bytes(query)
    scores = []
    for document in documents:
        if len(document) == 0:
            scores.append(0.0)
            continue
        similarity = hamming_similarity(q, as_bytes(document), dim)
        scores.append(float(similarity.max(axis=1).sum()))
    return scores
