"""Batching, bad input and robustness against the real server."""

from __future__ import annotations

import math

import httpx
import pytest
from vllm_factory.heads.gliner.request import MAX_LABELS_PER_REQUEST
from vllm_factory.testing.gliner.linking import (
    LINKING_BAD_INPUTS,
    test_a_thousand_candidates_are_linked,
    test_linking_equals_labels_with_candidate_ids,
    test_reranking_chunks_equal_chunks_one_by_one,
)
from vllm_factory.testing.requests import assert_refused, bad_text_requests

# What a package's test module collects (``from ... import *``).
__all__ = [
    "test_a_thousand_candidates_are_linked",
    "test_bad_input_is_4xx_naming_the_field",
    "test_batched_equals_one_by_one",
    "test_linking_equals_labels_with_candidate_ids",
    "test_nan_threshold_is_rejected",
    "test_reranking_chunks_equal_chunks_one_by_one",
    "test_server_keeps_serving_identical_entities_after_bad_input",
    "test_string_and_list_text_and_duplicate_labels",
]

LABELS = ["person", "organization", "location", "date", "product"]


def _key(entities: list[dict]) -> list[tuple]:
    return [(e["text"], e["label"], e["start"], e["end"]) for e in entities]


def test_batched_equals_one_by_one(ner, corpus):
    texts = corpus["texts"][:12]
    data = {"labels": LABELS, "threshold": 0.3}
    batched = ner({**data, "text": texts})
    for text, together in zip(texts, batched):
        alone = ner({**data, "text": text})  # one text: its entities (vLLM Factory 0.2's form)
        assert _key(alone) == _key(together)
        for a, b in zip(alone, together):
            assert math.isclose(a["score"], b["score"], abs_tol=1e-5)


def test_string_and_list_text_and_duplicate_labels(ner):
    """A string text is answered with its entity list, a list of texts with one list each."""
    text = "Angela Merkel met Emmanuel Macron in Berlin."
    one = ner({"text": text, "labels": LABELS, "threshold": 0.05})
    dup = ner({"text": [text], "labels": LABELS + ["person", "date"], "threshold": 0.05})
    assert one and all(isinstance(e, dict) for e in one)
    assert len(dup) == 1 and _key(one) == _key(dup[0])


# Bad input for every GLiNER checkpoint; ``BAD_INPUTS`` adds what only uni-encoders refuse.
COMMON_BAD_INPUTS = [
    ({"text": "x"}, "data.labels"),
    ({"text": "x", "labels": []}, "data.labels"),
    ({"text": "x", "labels": ["person", ""]}, "data.labels"),
    ({"text": "x", "labels": ["  "]}, "data.labels"),
    ({"text": "x", "labels": ["l"] * (MAX_LABELS_PER_REQUEST + 1)}, "data.labels"),
    ({"text": "x", "labels": "person"}, "data.labels"),
    ({"text": "x", "labels": [1, 2]}, "data.labels"),
    ({"text": "x", "labels": ["person"], "threshold": 1.5}, "data.threshold"),
    ({"text": "x", "labels": ["person"], "threshold": -0.1}, "data.threshold"),
    ({"text": "x", "labels": ["person"], "threshold": "0.5"}, "data.threshold"),
    *bad_text_requests(labels=["person"]),
    ({"text": "x", "labels": ["person"], "flat_ner": "yes"}, "data.flat_ner"),
    ({"text": "x", "labels": ["person"], "multi_label": 1}, "data.multi_label"),
    ({"text": "ab cd", "labels": ["person"], "input_spans": []}, "data.input_spans"),
    ({"text": ["ab", "cd"], "labels": ["a"], "input_spans": [[]]}, "data.input_spans"),
    (
        {"text": "ab cd", "labels": ["a"], "input_spans": [[{"start": 3, "end": 9}]]},
        "data.input_spans",
    ),
    (
        {"text": "ab cd", "labels": ["a"], "input_spans": [[{"start": 2, "end": 2}]]},
        "data.input_spans",
    ),
    (
        {"text": "ab cd", "labels": ["a"], "input_spans": [[{"start": "0", "end": 2}]]},
        "data.input_spans",
    ),
    ({"text": "ab cd", "labels": ["a"], "input_spans": [[{"start": 0}]]}, "data.input_spans"),
    ({"text": "ab", "labels": ["a"], "return_class_probs": "yes"}, "data.return_class_probs"),
    ({"text": "ab", "labels": ["a"], "max_len": 0}, "data.max_len"),
    *LINKING_BAD_INPUTS,
]
# A uni-encoder's label prompt is built from marker tokens, so a label may not hold one, and
# its labels share the prompt with the text: 1,000 are refused.
BAD_INPUTS = [
    *COMMON_BAD_INPUTS,
    ({"text": "x", "labels": ["a <<ENT>> b"]}, "data.labels"),
    ({"text": "x", "labels": [f"l{i}" for i in range(1000)]}, "data.labels"),
    ({"text": "x", "candidates": [{"id": i, "label": f"l{i}"} for i in range(1000)]},
     "data.candidates"),
    ({"text": ["x"] * 5, "max_labels": 1,
      "candidates": [{"id": i, "label": f"l{i}"} for i in range(250)]}, "data.max_labels"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "field"), BAD_INPUTS)
def test_bad_input_is_4xx_naming_the_field(server, data, field):
    assert_refused(server, data, field)


def test_nan_threshold_is_rejected(server):
    # JSON has no NaN, but Python's parser accepts the literal: it must still be refused.
    body = '{"model": "%s", "data": {"text": "x", "labels": ["a"], "threshold": NaN}}'
    response = httpx.post(
        f"{server.url}/pooling", content=body % server.model,
        headers={"content-type": "application/json"}, timeout=60,
    )  # fmt: skip
    assert 400 <= response.status_code < 500, response.text


def test_server_keeps_serving_identical_entities_after_bad_input(server, ner, corpus):
    data = {"text": corpus["texts"][:6], "labels": LABELS, "threshold": 0.3}
    before = ner(data)
    for bad, _ in BAD_INPUTS:
        server.pooling(bad)
    assert server.is_alive()
    after = ner(data)
    assert [_key(x) for x in after] == [_key(x) for x in before]
