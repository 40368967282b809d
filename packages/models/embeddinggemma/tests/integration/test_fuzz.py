"""Generated and hostile request bodies against the EmbeddingGemma server
(:mod:`vllm_factory.testing.fuzz`; ``nox -s fuzz`` runs 10,000 of them)."""

from __future__ import annotations

import numpy as np
from vllm_factory.models.embeddinggemma.request import EmbeddingGemmaRequest
from vllm_factory.testing.fuzz import request_bodies, run_fuzz

VALID = {"text": "What is the knapsack problem?", "prompt_name": "query"}
PROSE = " ".join(f"word{i % 500} and more text about item {i}." for i in range(60_000))
HOSTILE = [
    {"text": [PROSE[:1_000_000]] * 8},
    {"text": [PROSE[:3000]] * 1024},
    {"text": "caf\ud800e"},
    {"text": "x", "dimensions": 10**30},
]


def test_generated_and_hostile_bodies(server):
    run_fuzz(server, request_bodies(EmbeddingGemmaRequest, VALID), VALID, HOSTILE,
             compare=lambda a, b: np.allclose(a, b, atol=1e-6), name="embeddinggemma")  # fmt: skip
