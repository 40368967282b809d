"""Batching, bad input and robustness of a served GLiNER2 model against the real server."""

from __future__ import annotations

import pytest
from vllm_factory.testing.gliner2.parity import same_result
from vllm_factory.testing.requests import assert_refused, bad_text_requests

# What a package's test module collects (``from ... import *``).
__all__ = [
    "test_bad_input_is_4xx_naming_the_field",
    "test_list_text_equals_one_by_one",
    "test_over_length_text_is_4xx_naming_the_limit",
    "test_server_keeps_serving_identical_results_after_bad_input",
]

ENTS = ["person", "organization", "location"]
GOOD = {"schema": {"entities": ENTS, "classifications": [{"task": "tone",
        "labels": ["formal", "casual"]}], "relations": ["works_for"]}}  # fmt: skip
TEXT = "Marie Curie worked at the University of Paris with Pierre Curie."

BAD_INPUTS = [
    ({"text": "x"}, "data.schema"),
    ({"text": "x", "schema": {"events": ["a"]}}, "data.schema.events"),
    ({"text": "x", "schema": {}}, "data.schema"),
    ({"text": "x", "schema": []}, "data.schema"),
    ({"text": "x", "schema": {"entities": []}}, "data.schema.entities"),
    ({"text": "x", "schema": {"entities": ["a", "a"]}}, "data.schema.entities"),
    ({"text": "x", "schema": {"entities": ["a", 3]}}, "data.schema.entities[1]"),
    ({"text": "x", "schema": {"entities": {"a": 3}}}, "data.schema.entities.a"),
    (
        {"text": "x", "schema": {"entities": {"a": {"threshold": 2}}}},
        "data.schema.entities.a.threshold",
    ),
    (
        {"text": "x", "schema": {"entities": {"a": {"dtype": "int"}}}},
        "data.schema.entities.a.dtype",
    ),
    ({"text": "x", "schema": {"entities": ["a [E] b"]}}, "data.schema.entities[0]"),
    (
        {"text": "x", "schema": {"structures": {"s": {"fields": []}}}},
        "data.schema.structures.s.fields",
    ),
    ({"text": "x", "schema": {"structures": {"s": {}}}}, "data.schema.structures.s.fields"),
    (
        {"text": "x", "schema": {"structures": {"s": {"fields": [{"name": "a"}, {"name": "a"}]}}}},
        "data.schema.structures.s.fields",
    ),
    (
        {
            "text": "x",
            "schema": {"structures": {"s": {"fields": [{"name": "a"}], "mode": "natural"}}},
        },
        "data.schema.structures.s.mode",
    ),
    (
        {"text": "x", "schema": {"classifications": [{"task": "t", "labels": ["a"]}]}},
        "data.schema.classifications[0].labels",
    ),
    (
        {
            "text": "x",
            "schema": {"classifications": [{"task": "t", "labels": ["a", "b"], "top_k": 0}]},
        },
        "data.schema.classifications[0].top_k",
    ),
    (
        {
            "text": "x",
            "schema": {
                "classifications": [{"task": "t", "labels": ["a", "b"], "class_act": "relu"}]
            },
        },
        "data.schema.classifications[0].class_act",
    ),
    (
        {"text": "x", "schema": {"entities": ["a"], "entity_attributes": {}}},
        "data.schema.entity_attributes",
    ),
    (
        {
            "text": "x",
            "schema": {
                "entities": ["entities"],
                "structures": {"entities": {"fields": [{"name": "a"}]}},
            },
        },
        "data.schema",
    ),
    ({"text": "x", "entities": [f"label {i}" for i in range(1000)]}, "data.entities"),
    ({"text": "x", "entities": ["a"], "relations": ["r"]}, "data.relations"),
    ({"text": "x", "entities": ["a"], "schema": {"entities": ["a"]}}, "data.entities"),
    ({"text": "x", "structures": {"s": ["a::[x|y]::str", 5]}}, "data.structures.s[1]"),
    ({"text": "x", "classifications": {"t": ["only"]}}, "data.classifications.t"),
    ({"text": "x", "entities": ["a"], "threshold": 1.5}, "data.threshold"),
    ({"text": "x", "entities": ["a"], "max_len": 0}, "data.max_len"),
    ({"text": "x", "entities": ["a"], "include_spans": "yes"}, "data.include_spans"),
    *bad_text_requests(entities=["a"]),
]


@pytest.mark.parametrize(("data", "field"), BAD_INPUTS)
def test_bad_input_is_4xx_naming_the_field(server, data, field):
    assert_refused(server, data, field)


def test_over_length_text_is_4xx_naming_the_limit(server):
    """With ``long_text`` "error", a schema prompt plus text over --max-model-len is refused
    (not truncated), naming the limit; a long schema alone that fills the context always."""
    response = server.pooling({"text": "word " * 2000, "entities": ENTS, "long_text": "error"})
    assert response.status_code == 400, response.text
    assert "data.text" in response.text and "512" in response.text, response.text
    labels = {f"label number {i}": f"description {i} " * 10 for i in range(40)}
    response = server.pooling({"text": "short text", "entities": labels})
    assert response.status_code == 400 and "512" in response.text, response.text


def test_list_text_equals_one_by_one(extract, cases):
    texts = [c["text"] for c in cases[:8]]
    together = extract({**GOOD, "text": texts, "include_confidence": True})
    assert isinstance(together, list) and len(together) == len(texts)
    for text, batched in zip(texts, together):
        alone = extract({**GOOD, "text": text, "include_confidence": True})
        # Same decisions; confidences equal up to float noise (other batch shapes).
        same_result(alone, batched, 1e-5, text[:30])


def test_server_keeps_serving_identical_results_after_bad_input(server, extract):
    data = {**GOOD, "text": TEXT, "include_spans": True, "include_confidence": True}
    before = extract(data)
    for bad, _ in BAD_INPUTS:
        server.pooling(bad)
    assert server.is_alive()
    assert extract(data) == before
