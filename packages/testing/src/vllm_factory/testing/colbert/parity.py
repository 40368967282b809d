"""Served token vectors vs the reference libraries' outputs for the same weights (the ColBERT
packages' shared parity test; the libraries are the package's ``ColBERTPackage.libraries``),
for PyLate's layout and for sentence-transformers' own (``checkpoint-st``).

Below fp32 the limit follows the first library's own run in that dtype
(``ref-<library>-bf16.npz``; see ``vllm_factory.testing.parity``)."""

from __future__ import annotations

import numpy as np
import pytest
from vllm_factory.testing.colbert.fixtures import encoder, load_vectors
from vllm_factory.testing.parity import LibraryError, check_vectors, tolerance
from vllm_factory.testing.report import record

# What a package's test module collects (``from ... import *``).
__all__ = ["test_parity", "test_sentence_transformers_layout", "test_served_scores_match_pylate"]


@pytest.mark.parity
@pytest.mark.parametrize("part", ["queries", "documents"])
def test_parity(server, encode, reference, reference_dir, corpus, colbert_package, part):
    texts = corpus[part]
    assert len(texts) >= 20
    served = encode(texts, is_query=part == "queries")
    yardstick = colbert_package.libraries[0]
    own_file = reference_dir / f"ref-{yardstick}-bf16.npz"
    own_run = load_vectors(own_file)[part] if own_file.exists() else None
    for library in colbert_package.libraries:
        expected = reference(library)[part]
        check_vectors(server, colbert_package.name, f"{library}/{part}", served, expected, own_run)


@pytest.mark.parity
def test_served_scores_match_pylate(server, reference, reference_dir, corpus, colbert_package):
    """POST /pooling {query, documents}: every corpus query against every corpus document,
    scored in the server, vs ``pylate.scores.colbert_scores`` of PyLate's own vectors."""
    scores = np.load(reference_dir / "ref-pylate-scores.npz")
    expected = scores["scores"]
    served = []
    for query in corpus["queries"]:
        response = server.pooling({"query": query, "documents": corpus["documents"]})
        assert response.status_code == 200, response.text
        served.append(response.json()["data"]["scores"])
    served = np.asarray(served)
    assert served.shape == expected.shape
    # Limits per query token (see TOLERANCES), times each query's number of vectors.
    lengths = np.asarray([len(v) for v in reference(colbert_package.libraries[0])["queries"]])[
        :, None
    ]
    worst = float((np.abs(served - expected) / lengths).max())
    own = None
    if server.dtype != "float32":
        own_diff = np.abs(scores["scores_bf16"] - expected) / lengths
        own = LibraryError(max_abs_diff=float(own_diff.max()))
    limit = tolerance(server.dtype, own).maxsim
    agree = float((served.argmax(axis=1) == expected.argmax(axis=1)).mean())
    print(f"\nserved scores ({server.dtype}): {served.size} query x document scores, max |diff| "
          f"{float(np.abs(served - expected).max()):.2e}, per query token {worst:.2e} (limit "
          f"{limit:.1e}); best document the same for {agree:.0%} of queries"
          + (f"; PyLate's own bf16 run: {own.max_abs_diff:.2e} per query token" if own else ""))  # fmt: skip
    record(colbert_package.name, "parity", "scores", {
        "dtype": server.dtype, "scores": int(served.size),
        "maxsim_max_abs_diff": float(np.abs(served - expected).max()),
        "maxsim_max_abs_diff_per_token": worst,
        "threshold_per_token": limit, "best_document_agreement": agree,
        "library_bf16_max_abs_diff_per_token": own.max_abs_diff if own else None,
    })  # fmt: skip
    assert worst <= limit


@pytest.mark.parity
@pytest.mark.parametrize("part", ["queries", "documents"])
def test_sentence_transformers_layout(
    st_layout_server, reference_dir, corpus, colbert_package, part
):
    """A checkpoint saved by sentence-transformers' MultiVectorEncoder, read by its own rules
    (prompts, lengths, expansion strategy, skiplist sides), vs its encode_query/_document."""
    served = encoder(st_layout_server)(corpus[part], is_query=part == "queries")
    expected = load_vectors(reference_dir / "ref-st-layout.npz")[part]
    own_run = load_vectors(reference_dir / "ref-st-layout-bf16.npz")[part]
    key = f"st-layout/{part}"
    check_vectors(st_layout_server, colbert_package.name, key, served, expected, own_run)
