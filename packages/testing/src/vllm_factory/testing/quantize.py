"""sentence-transformers' ``quantize_embeddings`` as the yardstick of the served compact vectors
(``embed_dtype``): the library runs in a reference venv on the float vectors a test got from
the server, and the test compares its answer with the server's compact one."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from vllm_factory.testing.refenv import SCRIPTS, ReferenceEnv

QUANTIZE = SCRIPTS / "st_quantize.py"


class Job(NamedTuple):
    """One ``quantize_embeddings`` call: ``matrices`` as one list of multi-vector matrices (one
    calibration for all), or with ``single`` stacked as one ``[n, dim]`` array of vectors."""

    matrices: Sequence[np.ndarray]
    precision: str
    ranges: np.ndarray | None = None
    single: bool = False


def library_quantize(env: ReferenceEnv, jobs: Sequence[Job]) -> list[list[np.ndarray]]:
    """``quantize_embeddings`` (in ``env``, a venv with sentence-transformers 6.2) of each job,
    in one process; per job, one array per matrix."""
    arrays: dict[str, np.ndarray] = {}
    for i, job in enumerate(jobs):
        arrays[f"{i}.matrices"] = np.concatenate(job.matrices).astype(np.float32)
        arrays[f"{i}.sizes"] = np.array([len(m) for m in job.matrices])
        arrays[f"{i}.precision"] = np.array(job.precision)
        arrays[f"{i}.single"] = np.array(job.single)
        if job.ranges is not None:
            arrays[f"{i}.ranges"] = np.asarray(job.ranges, dtype=np.float32)
    with tempfile.TemporaryDirectory() as folder:
        inputs, output = Path(folder) / "in.npz", Path(folder) / "out.npz"
        np.savez(inputs, **arrays)
        env.ensure().run(QUANTIZE, inputs, output)
        results = np.load(output)
        return [
            np.split(results[str(i)], np.cumsum([len(m) for m in job.matrices])[:-1])
            for i, job in enumerate(jobs)
        ]


def assert_served_equal(
    served: np.ndarray,
    want: np.ndarray,
    floats: np.ndarray,
    precision: str,
    ranges: np.ndarray | None = None,
) -> None:
    """``served`` equals the library's ``want`` for the float vectors ``floats`` of a separate
    request, but for numbers whose float sits on a bucket edge (a sign at 0 for the binary
    types, within 1e-3 of a step of an edge for int8 / uint8; ``ranges`` None: the floats'
    own), where the engine's last bit may differ from one batch to the next: there one bucket
    apart at most (binary: that byte)."""
    served, want = np.asarray(served, dtype=np.int64), np.asarray(want, dtype=np.int64)
    assert served.shape == want.shape, (served.shape, want.shape)
    floats = np.asarray(floats, dtype=np.float32)
    if precision in ("binary", "ubinary"):
        near = np.packbits(np.abs(floats) < 1e-6, axis=-1) > 0
        allowed = near
    else:
        if ranges is None:
            ranges = np.vstack((floats.min(axis=0), floats.max(axis=0)))
        low, high = np.asarray(ranges, dtype=np.float32)
        step = np.where(high == low, 1, (high - low) / 255)
        position = (floats - low) / step
        near = np.abs(position - np.round(position)) < 1e-3
        allowed = near & (np.abs(served - want) <= 1)
    differ = served != want
    assert not (differ & ~allowed).any(), (
        f"{precision}: {int((differ & ~allowed).sum())} of {served.size} numbers differ from "
        f"the library's off a bucket edge (first at {np.argwhere(differ & ~allowed)[0]})"
    )
    # every difference is at an edge (above); a tiny checkpoint's few hundred numbers may hold
    # several such edges in one batch (3 seen), so the count is bounded by 0.1 % (at least 4)
    assert differ.sum() <= max(4, served.size // 1000), f"{precision}: {int(differ.sum())} differ"


def _encoded(server, data: dict) -> list[np.ndarray]:
    from vllm_factory.heads.colbert.vectors import decode_vectors  # the multi-vector heads

    response = server.pooling(data)
    assert response.status_code == 200, response.text
    return [decode_vectors(item) for item in response.json()["data"]]


def check_multivector_compact(
    server, env: ReferenceEnv, documents: list[str], query: str, images: list[str] | None = None
) -> None:
    """A ColBERT / ColPali server's compact vectors (``embed_dtype``, JSON and base64) equal the
    library's of its float vectors for the same texts (int8 on the request's own ranges, uint8
    on given ones) and ``images`` (ColPali: base64 sources; int8 and binary); binary / ubinary
    scoring is MaxSim on the dimensions whose signs agree, and unusable ``calibration`` is a
    400 naming it."""
    floats = _encoded(server, {"text": documents, "encoding_format": "base64"})
    rows = np.concatenate(floats)
    dim = rows.shape[1]
    ranges = np.vstack((rows.min(axis=0) - 0.01, rows.max(axis=0) + 0.02))
    (query_floats,) = _encoded(server, {"text": [query], "is_query": True,
                                        "encoding_format": "base64"})  # fmt: skip
    checks, jobs = [], []  # (served, float rows, precision, ranges) beside the library's job
    cases = [("int8", None, "base64"), ("uint8", ranges, "float"), ("binary", None, "float"),
             ("ubinary", None, "base64")]  # fmt: skip
    for precision, given, encoding_format in cases:
        data = {"text": documents, "embed_dtype": precision, "encoding_format": encoding_format}
        if given is not None:
            data["calibration"] = given.tolist()
        checks.append((_encoded(server, data), rows, precision, given))
        jobs.append(Job(floats, precision, given))
    if images:
        image_floats = _encoded(server, {"image": images, "encoding_format": "base64"})
        for precision in ("int8", "binary"):
            served = _encoded(server, {"image": images, "embed_dtype": precision})
            checks.append((served, np.concatenate(image_floats), precision, None))
            jobs.append(Job(image_floats, precision))
    jobs.append(Job([query_floats, *floats], "ubinary"))
    *wanted, packed = library_quantize(env, jobs)
    for (served, float_rows, precision, given), want in zip(checks, wanted):
        assert [len(m) for m in served] == [len(m) for m in want]
        assert_served_equal(np.concatenate(served), np.concatenate(want), float_rows, precision,
                            given)  # fmt: skip

    response = server.pooling({"query": query, "documents": documents, "embed_dtype": "ubinary"})
    assert response.status_code == 200, response.text
    scores = response.json()["data"]["scores"]
    bits = [np.unpackbits(p, axis=-1)[:, :dim].astype(bool) for p in packed]
    want = [float((bits[0][:, None] == d[None]).sum(-1).max(axis=1).sum()) for d in bits[1:]]
    # A sign at 0 in one forward and not the other moves a score by one dimension.
    np.testing.assert_allclose(scores, want, atol=2)

    for bad in (
        {"text": documents, "embed_dtype": "int8", "calibration": [[0.0], [1.0]]},
        {"text": documents, "embed_dtype": "int8", "calibration": [[1.0] * dim, [0.0] * dim]},
        {"query": query, "documents": documents, "embed_dtype": "uint8",
         "calibration": [[0.0] * (dim + 1), [1.0] * (dim + 1)]},
    ):  # fmt: skip
        response = server.pooling(bad)
        assert response.status_code == 400, response.text
        assert "data.calibration" in response.text
