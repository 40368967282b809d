"""``embed_dtype``: the served compact vectors equal sentence-transformers' ``quantize_embeddings``
(run in the reference venv) of the served float vectors of the same texts (a separate request:
numbers on a bucket edge may land one bucket apart, ``assert_served_equal``); bad calibration
is a 400 naming ``data.calibration``."""

from __future__ import annotations

import embeddinggemma_reference as reference_build
import numpy as np
import pytest
from vllm_factory.testing.quantize import Job, assert_served_equal, library_quantize


def _served(server, data: dict) -> list:
    response = server.pooling(data)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_compact_vectors_equal_the_library(server, texts):
    base = {"text": texts[:6]}
    floats = np.asarray([item["embedding"] for item in _served(server, base)], dtype=np.float32)
    ranges = np.vstack((floats.min(axis=0) - 0.01, floats.max(axis=0) + 0.02))
    cases = [("int8", None), ("uint8", ranges), ("binary", None), ("ubinary", None)]
    served = []
    for precision, given in cases:
        data = {**base, "embed_dtype": precision}
        if given is not None:
            data["calibration"] = given.tolist()
        served.append(np.asarray([item["embedding"] for item in _served(server, data)]))
    # One text: its bare vector, in ints.
    one = np.asarray([_served(server, {"text": texts[0], "embed_dtype": "ubinary"})])
    jobs = [Job([floats], precision, given, single=True) for precision, given in cases]
    jobs.append(Job([floats[:1]], "ubinary", single=True))
    wanted = library_quantize(reference_build.st_env(), jobs)
    for got, (precision, given), (want,) in zip(
        [*served, one], [*cases, ("ubinary", None)], wanted
    ):
        rows = floats[: len(got)]
        assert_served_equal(got, want, rows, precision, given)


@pytest.mark.parametrize(
    "data",
    [
        {"text": "a", "embed_dtype": "int8"},  # one vector: no ranges to take
        {"text": ["a", "b"], "embed_dtype": "int8", "calibration": [[0.0], [1.0]]},  # length
        {"text": ["a", "b"], "embed_dtype": "uint8", "calibration": [[1.0, 0.0], [0.0, 1.0]]},
        {"text": ["a", "b"], "embed_dtype": "binary", "calibration": [[0.0], [1.0]]},
    ],
)
def test_unusable_calibration_is_a_400(server, data):
    response = server.pooling(data)
    assert response.status_code == 400, response.text
    assert "data.calibration" in response.text
