"""Requests against a bi-encoder GLiNER server: the shared request suite where it applies,
and what differs (labels are encoded on their own, so marker tokens are plain text in them;
a label longer than the label encoder takes is refused)."""

from __future__ import annotations

import pytest
from vllm_factory.testing.gliner.requests import (
    COMMON_BAD_INPUTS,
    test_batched_equals_one_by_one,
    test_nan_threshold_is_rejected,
    test_string_and_list_text_and_duplicate_labels,
)

# What a package's test module collects (``from ... import *``).
__all__ = [
    "test_bad_input_is_4xx_naming_the_field",
    "test_batched_equals_one_by_one",
    "test_label_order_and_repeats_do_not_change_scores",
    "test_marker_tokens_are_plain_text_in_bi_encoder_labels",
    "test_nan_threshold_is_rejected",
    "test_server_keeps_serving_identical_scores_after_bad_input",
    "test_string_and_list_text_and_duplicate_labels",
]

LONG_LABEL = " ".join(["organisation"] * 400)  # past any tiny label encoder's positions
BI_BAD_INPUTS = [*COMMON_BAD_INPUTS, ({"text": "x", "labels": [LONG_LABEL]}, "data.labels")]


@pytest.mark.parametrize(("data", "field"), BI_BAD_INPUTS)
def test_bad_input_is_4xx_naming_the_field(server, data, field):
    response = server.pooling(data)
    assert 400 <= response.status_code < 500, response.text
    assert field in response.text, response.text


def test_marker_tokens_are_plain_text_in_bi_encoder_labels(ner):
    (entities,) = ner({"text": "Angela Merkel met Emmanuel Macron.", "labels": ["a <<ENT>> b"]})
    assert all(e["label"] == "a <<ENT>> b" for e in entities)


def test_label_order_and_repeats_do_not_change_scores(ner, corpus):
    """Each label's vector comes from the engine's cache after its first use: the same label in
    another position, another request, or beside other labels scores the same."""
    text = corpus["texts"][:3]
    first = ner({"text": text, "labels": ["person", "location"], "return_scores": True})
    again = ner({"text": text, "labels": ["city", "location", "person"], "return_scores": True})
    for one, other in zip(first, again):
        for w, widths in enumerate(one["scores"]):
            for k, labels in enumerate(widths):
                person, location = labels
                assert other["scores"][w][k][2] == pytest.approx(person, abs=1e-6)
                assert other["scores"][w][k][1] == pytest.approx(location, abs=1e-6)


def test_server_keeps_serving_identical_scores_after_bad_input(server, ner, corpus):
    data = {"text": corpus["texts"][:6], "labels": ["person", "date"], "return_scores": True}
    before = ner(data)
    for bad, _ in BI_BAD_INPUTS:
        server.pooling(bad)
    assert server.is_alive()
    assert ner(data) == before
