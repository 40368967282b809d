"""Served token vectors vs colpali-engine's for the same weights and inputs (the ColPali
packages' shared parity test): text queries, text documents and images of several sizes,
aspect ratios and modes. Token counts must be identical and every token vector within the
session dtype's limit (``vllm_factory.testing.parity``; below fp32 it follows colpali-engine's
own run in that dtype). Scores computed in the server must be as close to MaxSim of the
reference vectors as the served vectors' own distance to them allows."""

from __future__ import annotations

import numpy as np
import pytest
from vllm_factory.testing.colpali.fixtures import image_b64
from vllm_factory.testing.colpali.references import pillow_drift
from vllm_factory.testing.parity import check_vectors, tolerance
from vllm_factory.testing.report import record

# What a package's test module collects (``from ... import *``).
__all__ = ["test_image_parity", "test_served_scores_match_reference", "test_text_parity"]


def own_run(server, reference, part: str):
    return reference(server.dtype)[part] if server.dtype != "float32" else None


@pytest.mark.parity
@pytest.mark.parametrize(("part", "is_query"), [("query", True), ("text", False)])
def test_text_parity(server, encode, reference, corpus, colpali_package, part, is_query):
    texts = corpus.queries if is_query else corpus.documents
    assert len(texts) >= (10 if is_query else 4)
    served = encode({"text": texts, "is_query": is_query})
    expected = reference()[part]
    key = "queries" if is_query else "text documents"
    check_vectors(
        server, colpali_package.name, key, served, expected, own_run(server, reference, part)
    )


@pytest.mark.parity
def test_image_parity(server, encode, reference, reference_dir, corpus, colpali_package):
    assert len(corpus.images) >= 10
    sizes = {tuple(np.asarray(v).shape) for v in reference()["image"]}
    assert len(sizes) >= 5, "the corpus' images should give several token counts"
    served = encode({"image": [image_b64(path) for path in corpus.images]})
    expected = reference()["image"]
    try:
        check_vectors(
            server,
            colpali_package.name,
            "images",
            served,
            expected,
            own_run(server, reference, "image"),
        )
    except AssertionError as error:
        drift = pillow_drift(reference_dir)
        if drift is None:
            raise
        raise AssertionError(
            f"{error}: the reference decoded its images with Pillow {drift[0]}, this Python "
            f"(the server's) has {drift[1]}; encode the reference again here "
            f"(packages/testing/gpu/check.py does where it can, or --reencode {colpali_package.name})"
        ) from error


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    return float((query.astype(np.float64) @ document.astype(np.float64).T).max(axis=1).sum())


def largest_shift(served: list[np.ndarray], expected: list[np.ndarray]) -> float:
    """The largest Euclidean distance between a served token vector and the reference's."""
    return max(float(np.linalg.norm(a - b, axis=1).max()) for a, b in zip(served, expected))


@pytest.mark.parity
def test_served_scores_match_reference(server, encode, reference, corpus, colpali_package):
    """POST /pooling {query, images, documents}: each query against every image and text
    document, scored in the server, vs MaxSim of colpali-engine's own vectors (what its
    ``score_multi_vector`` computes for one query and one document).

    A MaxSim score moves per query token by at most the sum of how far a query vector and a
    document vector moved, so the limit follows the vectors' own measured distance to the
    reference (twice it, for the scoring request's batch, which can round differently on a GPU)
    plus the dtype's score tolerance: any error of the scoring itself shows beyond it."""
    ref = reference()
    documents = ref["image"] + ref["text"]
    images = [image_b64(path) for path in corpus.images]
    served_documents = encode({"image": images}) + encode({"text": corpus.documents})
    queries = corpus.queries[:4]
    served_queries = encode({"text": queries, "is_query": True})
    shift = largest_shift(served_queries, ref["query"][:4])
    shift += largest_shift(served_documents, documents)
    limit = tolerance(server.dtype).maxsim + 2 * shift
    worst, worst_own = 0.0, 0.0
    for i, query in enumerate(queries):
        response = server.pooling({"query": query, "images": images, "documents": corpus.documents})
        assert response.status_code == 200, response.text
        served = np.asarray(response.json()["data"]["scores"])
        own = np.asarray([maxsim(served_queries[i], d) for d in served_documents])
        expected = np.asarray([maxsim(ref["query"][i], d) for d in documents])
        assert served.shape == expected.shape == own.shape
        length = len(ref["query"][i])
        worst = max(worst, float(np.abs(served - expected).max()) / length)
        worst_own = max(worst_own, float(np.abs(served - own).max()) / length)
    print(f"\nscores ({server.dtype}): worst |served - reference| per query token {worst:.2e}"
          f" (limit {limit:.2e}: vectors moved up to {shift:.1e}); vs MaxSim of the vectors"
          f" served for the same inputs {worst_own:.1e}")  # fmt: skip
    record(colpali_package.name, "parity", "scores", {
        "dtype": server.dtype, "max_abs_diff_per_query_token": worst, "threshold": limit,
        "vector_shift": shift, "max_abs_diff_vs_served_vectors": worst_own,
    })  # fmt: skip
    assert worst <= limit
