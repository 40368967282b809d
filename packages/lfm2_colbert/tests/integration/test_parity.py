"""Served vectors vs PyLate's own outputs for the same weights (transformers' Lfm2Model)."""

from __future__ import annotations

import json
import os

import pytest
from vllm_factory.core.registration import installed_vllm
from vllm_factory.core.testing.parity import compare_token_vectors
from vllm_factory.core.testing.refenv import artifacts_root

MIN_COSINE = 0.99999


@pytest.mark.parity
@pytest.mark.parametrize("part", ["queries", "documents"])
def test_parity_with_pylate(encode, reference, corpus, part):
    expected = reference("pylate")[part]
    texts = corpus[part]
    assert len(texts) >= 20
    served = encode(texts, is_query=part == "queries")
    parity = compare_token_vectors(served, expected)
    print(f"\npylate {part}: {parity.summary()}")
    _record(part, parity)
    assert parity.count_mismatches == [], "token counts differ from the reference"
    assert parity.min_cosine >= MIN_COSINE


def _record(part, parity) -> None:
    """Keep the figures per vLLM version (read by `nox -s parity` / the matrix summary)."""
    vllm = installed_vllm()
    name = f"{vllm.distribution}-{vllm.version}" if vllm else "no-vllm"
    path = artifacts_root() / "reports" / f"lfm2_colbert-parity-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[f"pylate/{part}"] = {
        "items": parity.items,
        "token_count_mismatches": len(parity.count_mismatches),
        "min_cosine": parity.min_cosine,
        "max_abs_diff": parity.max_abs_diff,
        "pid": os.getpid(),
    }
    path.write_text(json.dumps(data, indent=2))
