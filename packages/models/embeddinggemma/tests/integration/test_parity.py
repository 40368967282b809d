"""Served embeddings vs sentence-transformers' ``encode`` for the same weights: every prompt
name the checkpoint declares (and none), the full size and every Matryoshka size."""

from __future__ import annotations

import numpy as np
import pytest
from vllm_factory.testing.parity import LibraryError, Tolerance, cosine_rows, tolerance
from vllm_factory.testing.report import record

PROMPT_NAMES = [None, "query", "document", "clustering"]
DIMENSIONS = [None, 64, 32]


def test_checkpoint_declares_what_the_parity_grid_covers(reference):
    assert sorted(reference.meta["prompts"]) == sorted(p for p in PROMPT_NAMES if p)
    assert sorted(reference.meta["matryoshka_dimensions"]) == sorted(d for d in DIMENSIONS if d)


@pytest.mark.parity
@pytest.mark.parametrize("dimensions", DIMENSIONS)
@pytest.mark.parametrize("prompt_name", PROMPT_NAMES)
def test_pooling_matches_sentence_transformers(
    server, embed, reference, texts, prompt_name, dimensions
):
    assert len(texts) >= 40
    expected = reference(prompt_name, dimensions)
    served, num_tokens = embed(texts, prompt_name=prompt_name, dimensions=dimensions)
    assert served.shape == expected.shape
    np.testing.assert_array_equal(num_tokens, reference.num_tokens(prompt_name))
    cosines = cosine_rows(served, expected)
    max_abs = float(np.abs(served - expected).max())
    print(f"\n/pooling {prompt_name}/{dimensions}: min cosine {cosines.min():.8f}, "
          f"max |diff| {max_abs:.2e}")  # fmt: skip
    limit, own = _limit(server, reference, expected, prompt_name, dimensions)
    _record(server, f"pooling/{prompt_name}/{dimensions or 'full'}", cosines, max_abs, own)
    assert cosines.min() >= limit.min_cosine
    # Same scale as sentence-transformers: unit norm at full size, not re-normalised when cut.
    assert max_abs < limit.vector_abs


@pytest.mark.parity
@pytest.mark.parametrize("prompt_name", PROMPT_NAMES)
def test_v1_embeddings_matches_sentence_transformers(server, reference, texts, prompt_name):
    """/v1/embeddings embeds the text as given: the client prepends the prompt itself."""
    prompt = reference.meta["prompts"].get(prompt_name, "") if prompt_name else ""
    # Texts sentence-transformers truncated would be rejected (or cut from the left) by vLLM.
    keep = reference.num_tokens(prompt_name) < reference.meta["max_seq_length"]
    inputs = [prompt + text for text, kept in zip(texts, keep) if kept]
    assert len(inputs) >= 40
    response = server.post("/v1/embeddings", {"model": server.model, "input": inputs})
    assert response.status_code == 200, response.text
    served = np.asarray([item["embedding"] for item in response.json()["data"]])
    expected = reference(prompt_name)[keep]
    full = reference(prompt_name)
    cosines = cosine_rows(served, expected)
    print(f"\n/v1/embeddings {prompt_name}: min cosine {cosines.min():.8f}")
    max_abs = float(np.abs(served - expected).max())
    limit, own = _limit(server, reference, full, prompt_name)
    _record(server, f"v1-embeddings/{prompt_name}/full", cosines, max_abs, own)
    assert cosines.min() >= limit.min_cosine


def _record(server, key: str, cosines: np.ndarray, max_abs: float, own: LibraryError | None):
    figures = {"dtype": server.dtype, "items": len(cosines), "min_cosine": float(cosines.min())}
    figures["library_bf16_min_cosine"] = own.min_cosine if own else None
    record("embeddinggemma", "parity", key, {**figures, "max_abs_diff": max_abs})


def _limit(
    server, reference, expected, prompt_name, dimensions=None
) -> tuple[Tolerance, LibraryError | None]:
    """Below fp32: within BF16_FACTOR of sentence-transformers' own run in that dtype."""
    if server.dtype == "float32":
        return tolerance(server.dtype), None
    own = reference(prompt_name, dimensions, dtype=server.dtype)
    error = LibraryError(
        min_cosine=float(cosine_rows(own, expected).min()),
        max_abs_diff=float(np.abs(own - expected).max()),
    )
    return tolerance(server.dtype, error), error
