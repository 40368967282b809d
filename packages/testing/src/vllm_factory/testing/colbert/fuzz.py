"""Generated and hostile ColBERT bodies against the family's server
(:mod:`vllm_factory.testing.fuzz`); a package's ``tests/integration/test_fuzz.py``
star-imports this module."""

from __future__ import annotations

import numpy as np
from vllm_factory.heads.colbert.request import ColBERTRequest
from vllm_factory.testing.fuzz import request_bodies, run_fuzz

VALID = {"text": "European Central Bank monetary policy", "is_query": True}
PROSE = " ".join(f"word{i % 500} and more text about item {i}." for i in range(60_000))
HOSTILE = [
    {"text": [PROSE[:1_000_000]] * 8},
    {"text": ["x" * 1_000_000] * 4},
    {"text": [PROSE[:2000]] * 1024},
    {"query": PROSE[:1_000_000], "documents": [PROSE[:500_000]] * 4, "top_k": 10**9},
    {"text": "caf\ud800e"},
    {"text": ["a"] * 1024, "encoding_format": "base64", "embed_dtype": "bfloat16"},
]  # fmt: skip


def test_generated_and_hostile_bodies(server):
    run_fuzz(server, request_bodies(ColBERTRequest, VALID), VALID, HOSTILE,
             compare=lambda a, b: np.allclose(a, b, atol=1e-5), name="colbert")  # fmt: skip


__all__ = ["test_generated_and_hostile_bodies"]
