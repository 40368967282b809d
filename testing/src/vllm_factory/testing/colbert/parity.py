"""Served token vectors vs the reference libraries' outputs for the same weights (the ColBERT
packages' shared parity test; the libraries are the package's ``ColBERTPackage.libraries``),
for PyLate's layout and for sentence-transformers' own (``checkpoint-st``).

Below fp32 the limit follows the first library's own run in that dtype
(``ref-<library>-bf16.npz``; see ``vllm_factory.testing.parity``)."""

from __future__ import annotations

import numpy as np
import pytest
from vllm_factory.testing.colbert.fixtures import encoder, load_vectors
from vllm_factory.testing.parity import LibraryError, compare_token_vectors, tolerance
from vllm_factory.testing.report import record

# What a package's test module collects (``from ... import *``).
__all__ = ["test_parity", "test_sentence_transformers_layout", "test_served_scores_match_pylate"]


def check_vectors(server, name: str, key: str, served, expected, own_run=None) -> None:
    """Served token vectors vs ``expected`` (fp32 reference); below fp32 the limit follows
    ``own_run``, the reference library's own run in the server's dtype. Records and asserts."""
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
