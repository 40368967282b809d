"""Generated and hostile GLiNER bodies against the family's server
(:mod:`vllm_factory.testing.fuzz`); a package's ``tests/integration/test_fuzz.py``
star-imports this module."""

from __future__ import annotations

from vllm_factory.heads.gliner.request import GLiNERRequest
from vllm_factory.testing.fuzz import request_bodies, run_fuzz

TEXT = "Ada Lovelace met Charles Babbage in London on 5 June 1833."
VALID = {"text": TEXT, "labels": ["person", "location", "date"], "threshold": 0.3}
LONG = " ".join(f"Word{i} met Ada in Paris on day {i}." for i in range(40))
CANDIDATES = [{"id": i, "label": f"entity {i}", "description": "d" * 20} for i in range(64)]
# The findings of the hardening issue and their scaled-up forms.
HOSTILE = [
    {"text": TEXT, "candidates": CANDIDATES[:8], "template": "{label}" + "." * 140_000},
    {"text": TEXT, "candidates": CANDIDATES * 32, "template": "{label}{description}" * 200},
    {"text": [LONG] * 64, "labels": [f"l{i}" for i in range(20)], "threshold": 0.0,
     "multi_label": True, "flat_ner": False},
    {"text": [LONG] * 64, "labels": [f"l{i}" for i in range(20)], "return_scores": True},
    {"text": [LONG] * 256, "labels": [f"l{i}" for i in range(256)]},
    {"text": [LONG * 10] * 16, "labels": ["person"], "max_len": 100_000},
    {"text": "caf\ud800e", "labels": ["person"]},
    {"text": TEXT, "labels": ["person"], "candidate_labels": ["Ada"] * 2048},
    {"text": TEXT, "labels": ["person"], "input_spans": [[{"start": 0, "end": 3}] * 4096]},
]  # fmt: skip


def _entities(answer):
    return [(e["text"], e["label"], e["start"], e["end"], round(e["score"], 4)) for e in answer]


def test_generated_and_hostile_bodies(server):
    run_fuzz(server, request_bodies(GLiNERRequest, VALID), VALID, HOSTILE,
             compare=lambda a, b: _entities(a) == _entities(b), name="gliner")  # fmt: skip


__all__ = ["test_generated_and_hostile_bodies"]
