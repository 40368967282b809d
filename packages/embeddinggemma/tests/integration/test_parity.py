"""Served embeddings vs sentence-transformers' ``encode`` for the same weights: every prompt
name the checkpoint declares (and none), the full size and every Matryoshka size."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from vllm_factory.core.registration import installed_vllm
from vllm_factory.core.testing.parity import cosine_rows
from vllm_factory.core.testing.refenv import artifacts_root

MIN_COSINE = 0.99999
PROMPT_NAMES = [None, "query", "document", "clustering"]
DIMENSIONS = [None, 64, 32]


def test_checkpoint_declares_what_the_parity_grid_covers(reference):
    assert sorted(reference.meta["prompts"]) == sorted(p for p in PROMPT_NAMES if p)
    assert sorted(reference.meta["matryoshka_dimensions"]) == sorted(d for d in DIMENSIONS if d)


@pytest.mark.parity
@pytest.mark.parametrize("dimensions", DIMENSIONS)
@pytest.mark.parametrize("prompt_name", PROMPT_NAMES)
def test_pooling_matches_sentence_transformers(embed, reference, texts, prompt_name, dimensions):
    assert len(texts) >= 40
    expected = reference(prompt_name, dimensions)
    served, num_tokens = embed(texts, prompt_name=prompt_name, dimensions=dimensions)
    assert served.shape == expected.shape
    np.testing.assert_array_equal(num_tokens, reference.num_tokens(prompt_name))
    cosines = cosine_rows(served, expected)
    max_abs = float(np.abs(served - expected).max())
    print(f"\n/pooling {prompt_name}/{dimensions}: min cosine {cosines.min():.8f}, "
          f"max |diff| {max_abs:.2e}")  # fmt: skip
    _record(f"pooling/{prompt_name}/{dimensions or 'full'}", cosines, max_abs)
    assert cosines.min() >= MIN_COSINE
    # Same scale as sentence-transformers: unit norm at full size, not re-normalised when cut.
    assert max_abs < 1e-4


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
    cosines = cosine_rows(served, expected)
    print(f"\n/v1/embeddings {prompt_name}: min cosine {cosines.min():.8f}")
    _record(f"v1-embeddings/{prompt_name}/full", cosines, float(np.abs(served - expected).max()))
    assert cosines.min() >= MIN_COSINE


def _record(key: str, cosines: np.ndarray, max_abs: float) -> None:
    """Keep the figures per vLLM version (read by `nox -s parity` / the matrix summary)."""
    vllm = installed_vllm()
    name = f"{vllm.distribution}-{vllm.version}" if vllm else "no-vllm"
    path = artifacts_root() / "reports" / f"embeddinggemma-parity-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = {
        "items": len(cosines),
        "min_cosine": float(cosines.min()),
        "max_abs_diff": max_abs,
        "pid": os.getpid(),
    }
    path.write_text(json.dumps(data, indent=2))
