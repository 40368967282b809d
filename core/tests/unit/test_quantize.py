"""Compact vectors against sentence-transformers' ``quantize_embeddings``: the expected arrays
were written by ``data/quantize_reference.py`` running the library (6.2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vllm_factory.core.quantize import (
    MAX_CALIBRATION_DIM,
    CalibrationError,
    binary_maxsim_scores,
    calibration_problem,
    dequantize,
    quantize,
    quantize_all,
)

EXPECTED = np.load(Path(__file__).with_name("data") / "quantize_expected.npz")
PRECISIONS = ("int8", "uint8", "binary", "ubinary")


@pytest.mark.parametrize("precision", PRECISIONS)
def test_own_ranges_equal_the_library(precision: str) -> None:
    got = quantize(EXPECTED["rows"], precision)
    want = EXPECTED[f"own_{precision}"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_given_ranges_equal_the_library(precision: str) -> None:
    got = quantize(EXPECTED["rows"], precision, EXPECTED["ranges"])
    np.testing.assert_array_equal(got, EXPECTED[f"given_{precision}"])
    assert got.dtype == EXPECTED[f"given_{precision}"].dtype


@pytest.mark.parametrize("precision", PRECISIONS)
def test_multi_vector_matrices_share_one_calibration(precision: str) -> None:
    sizes = EXPECTED["sizes"]
    matrices = np.split(EXPECTED["matrices"], np.cumsum(sizes)[:-1])
    got = quantize_all(matrices, precision)
    assert [len(m) for m in got] == list(sizes)
    np.testing.assert_array_equal(np.concatenate(got), EXPECTED[f"multi_{precision}"])


def test_one_vector_without_ranges_is_refused() -> None:
    with pytest.raises(CalibrationError):
        quantize(EXPECTED["rows"][:1], "int8")
    with pytest.raises(CalibrationError, match="dimensions"):
        quantize(EXPECTED["rows"], "uint8", np.zeros((2, 4)))


def test_calibration_problems() -> None:
    assert calibration_problem([[0.0, -1.0], [1.0, 1.0]]) is None
    assert "two lists" in calibration_problem([[0.0]])
    assert "one length" in calibration_problem([[0.0], [1.0, 2.0]])
    wide = [0.0] * (MAX_CALIBRATION_DIM + 1)
    assert "dimensions" in calibration_problem([wide, wide])
    assert "finite" in calibration_problem([[float("nan")], [1.0]])
    assert "above" in calibration_problem([[2.0], [1.0]])


def test_dequantized_buckets_round_back() -> None:
    ranges = EXPECTED["ranges"]
    for precision in ("int8", "uint8"):
        buckets = EXPECTED[f"given_{precision}"]
        again = quantize(dequantize(buckets, precision, ranges), precision, ranges)
        assert np.abs(again.astype(int) - buckets.astype(int)).max() <= 1


def test_binary_maxsim_counts_agreeing_signs() -> None:
    rng = np.random.default_rng(1)
    query = rng.standard_normal((3, 13)).astype(np.float32)
    documents = [rng.standard_normal((n, 13)).astype(np.float32) for n in (4, 0, 2)]
    want = []
    for document in documents:
        agree = ((query[:, None, :] > 0) == (document[None, :, :] > 0)).sum(-1)
        want.append(float(agree.max(axis=1).sum()) if len(document) else 0.0)
    for precision in ("binary", "ubinary"):
        packed = [quantize(d, precision) for d in documents]
        got = binary_maxsim_scores(quantize(query, precision), packed, 13, precision)
        assert got == want
