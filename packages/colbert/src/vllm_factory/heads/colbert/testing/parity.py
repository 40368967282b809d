"""Served token vectors vs the reference libraries' outputs for the same weights (the ColBERT
packages' shared parity test; the libraries are the package's ``ColBERTPackage.libraries``).

Below fp32 the limit follows the first library's own run in that dtype
(``ref-<library>-bf16.npz``; see ``vllm_factory.core.testing.parity``)."""

from __future__ import annotations

import pytest
from vllm_factory.core.testing.parity import LibraryError, compare_token_vectors, tolerance
from vllm_factory.core.testing.report import record


@pytest.mark.parity
@pytest.mark.parametrize("part", ["queries", "documents"])
def test_parity(server, encode, reference, reference_dir, corpus, colbert_package, part):
    texts = corpus[part]
    assert len(texts) >= 20
    served = encode(texts, is_query=part == "queries")
    own = None
    yardstick = colbert_package.libraries[0]
    if server.dtype != "float32":
        assert (reference_dir / f"ref-{yardstick}-bf16.npz").exists(), "no bf16 yardstick"
        own = compare_token_vectors(
            reference(f"{yardstick}-bf16")[part], reference(yardstick)[part]
        )
        assert own.count_mismatches == []
    limit = tolerance(server.dtype, own and LibraryError(min_cosine=own.min_cosine))
    for library in colbert_package.libraries:
        parity = compare_token_vectors(served, reference(library)[part])
        print(
            f"\n{library} {part} ({server.dtype}): {parity.summary()}"
            + (f"; {yardstick}'s own bf16 run: min cosine {own.min_cosine:.8f}" if own else "")
        )
        record(colbert_package.name, "parity", f"{library}/{part}", {
            "dtype": server.dtype, "items": parity.items,
            "token_count_mismatches": len(parity.count_mismatches),
            "min_cosine": parity.min_cosine, "max_abs_diff": parity.max_abs_diff,
            "threshold": limit.min_cosine,
            "library_bf16_min_cosine": own.min_cosine if own else None,
        })  # fmt: skip
        assert parity.count_mismatches == [], f"token counts differ from {library}'s"
        assert parity.min_cosine >= limit.min_cosine, library
