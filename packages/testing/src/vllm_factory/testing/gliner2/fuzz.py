"""Generated and hostile GLiNER2 bodies against the family's server
(:mod:`vllm_factory.testing.fuzz`); a package's ``tests/integration/test_fuzz.py``
star-imports this module."""

from __future__ import annotations

from vllm_factory.models.gliner2.request import GLiNER2Request
from vllm_factory.testing.fuzz import request_bodies, run_fuzz

TEXT = "Tim Cook announced the iPhone 15 at Apple Park."
VALID = {"text": TEXT, "schema": {"entities": ["person", "company", "product"],
         "classifications": [{"task": "tone", "labels": ["formal", "casual"]}]}}  # fmt: skip
LONG = " ".join(f"Ada met Babbage in London in {1800 + i}." for i in range(40))
HOSTILE = [
    {"text": [LONG] * 64, "entities": [f"t{i}" for i in range(20)], "threshold": 0.0},
    {"text": [LONG] * 64, "entities": [f"t{i}" for i in range(20)], "return_scores": True},
    {"text": "word " * 19_999, "entities": ["x"]},
    {"text": TEXT, "schema": {"entities": {f"e{i}": "d" * 500 for i in range(500)}}},
    {"text": TEXT, "entities": ["x"], "runtime": "onnx"},
    {"text": TEXT, "entities": ["pe\ud800"]},
]  # fmt: skip


def test_generated_and_hostile_bodies(server):
    run_fuzz(server, request_bodies(GLiNER2Request, VALID), VALID, HOSTILE, name="gliner2")


__all__ = ["test_generated_and_hostile_bodies"]
