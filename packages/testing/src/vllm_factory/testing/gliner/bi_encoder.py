"""Requests against a bi-encoder GLiNER server: the shared request suite where it applies,
and what differs (labels are encoded on their own, so marker tokens are plain text in them;
a label longer than the label encoder takes is refused)."""

from __future__ import annotations

import re
import time

import httpx
import numpy as np
import pytest
from vllm_factory.testing.gliner.requests import (
    COMMON_BAD_INPUTS,
    test_a_thousand_candidates_are_linked,
    test_batched_equals_one_by_one,
    test_linking_equals_labels_with_candidate_ids,
    test_nan_threshold_is_rejected,
    test_reranking_chunks_equal_chunks_one_by_one,
    test_string_and_list_text_and_duplicate_labels,
)
from vllm_factory.testing.requests import assert_refused

# What a package's test module collects (``from ... import *``).
__all__ = [
    "test_a_thousand_candidate_labels_are_scored",
    "test_a_thousand_candidates_are_linked",
    "test_bad_input_is_4xx_naming_the_field",
    "test_batched_equals_one_by_one",
    "test_label_cache_hits_and_misses_on_the_servers_metrics",
    "test_label_order_and_repeats_do_not_change_scores",
    "test_linking_equals_labels_with_candidate_ids",
    "test_marker_tokens_are_plain_text_in_bi_encoder_labels",
    "test_nan_threshold_is_rejected",
    "test_reranking_chunks_equal_chunks_one_by_one",
    "test_server_keeps_serving_identical_scores_after_bad_input",
    "test_string_and_list_text_and_duplicate_labels",
]

LONG_LABEL = " ".join(["organisation"] * 400)  # past any tiny label encoder's positions
BI_BAD_INPUTS = [*COMMON_BAD_INPUTS, ({"text": "x", "labels": [LONG_LABEL]}, "data.labels")]


@pytest.mark.parametrize(("data", "field"), BI_BAD_INPUTS)
def test_bad_input_is_4xx_naming_the_field(server, data, field):
    assert_refused(server, data, field)


def test_a_thousand_candidate_labels_are_scored(ner):
    """Entity linking sends every candidate of a text at once: a bi-encoder scores each label
    on its own, so 1,000 labels (up to MAX_LABELS_PER_REQUEST) are one request; each label's
    scores are those it gets beside a few others."""
    text = "Ada Lovelace met Charles Babbage in London."
    labels = [f"candidate {i}: entry {i} of a knowledge base" for i in range(1000)]
    many = ner({"text": text, "labels": labels, "return_scores": True})  # one text: its item
    few = ner({"text": text, "labels": labels[:3], "return_scores": True})
    scores, some = np.asarray(many["scores"]), np.asarray(few["scores"])
    assert scores.shape[2] == 1000
    assert np.allclose(scores[:, :, :3], some, rtol=0, atol=1e-5)


def test_marker_tokens_are_plain_text_in_bi_encoder_labels(ner):
    entities = ner({"text": "Angela Merkel met Emmanuel Macron.", "labels": ["a <<ENT>> b"]})
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
    """Same entities and scores (to float noise: vLLM may batch the texts differently) before
    and after every bad request."""
    data = {"text": corpus["texts"][:6], "labels": ["person", "date"], "return_scores": True}
    before = ner(data)
    for bad, _ in BI_BAD_INPUTS:
        server.pooling(bad)
    assert server.is_alive()
    for now, then in zip(ner(data), before):
        assert [_key(e) for e in now["entities"]] == [_key(e) for e in then["entities"]]
        assert np.allclose(now["scores"], then["scores"], rtol=0, atol=1e-5)


def _key(entity: dict) -> tuple:
    return (entity["text"], entity["label"], entity["start"], entity["end"])


CACHE_METRIC = re.compile(
    r"^vllm_factory:gliner_label_cache_(\w+?)(?:_total)? ([0-9.e+]+)$", re.MULTILINE
)


def _cache_metrics(server) -> dict[str, float]:
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    return {name: float(value) for name, value in CACHE_METRIC.findall(text)}


# Waits for a state, bounded only to stop a broken test: a busy CI host publishes late.
WAIT_LIMIT_S = 120.0


def _settled(server, within: float = WAIT_LIMIT_S) -> dict:
    """The metrics once earlier requests' counts are all published (two reads, more than the
    engine's publishing interval apart, agree)."""
    deadline = time.monotonic() + within
    last = _cache_metrics(server)
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = _cache_metrics(server)
        if now == last:
            return now
        last = now
    return last


def _after(server, before: dict, misses: float, hits: float, within: float = WAIT_LIMIT_S) -> dict:
    """The metrics once the engine published ``misses`` / ``hits`` more than ``before``
    (it writes them at most once a second)."""
    deadline = time.monotonic() + within
    while True:
        now = _cache_metrics(server)
        done = now.get("misses", 0) - before.get("misses", 0) >= misses and (
            now.get("hits", 0) - before.get("hits", 0) >= hits
        )
        if done or time.monotonic() > deadline:
            return now
        time.sleep(0.5)


def test_label_cache_hits_and_misses_on_the_servers_metrics(server, ner):
    """Two labels nobody sent before, on three texts: each is encoded once (2 misses; its
    other 2 uses that step are hits); the same request again hits all 6. The engine's counts
    reach the API server's /metrics."""
    stamp = time.time_ns()
    labels = [f"label-cache-probe {stamp}", f"another probe label {stamp}"]
    texts = ["Ada Lovelace wrote notes.", "Grace Hopper built compilers.", "Alan Turing."]
    before = _settled(server)
    assert {"hits", "misses", "evictions", "size", "capacity"} <= set(before), before
    ner({"text": texts, "labels": labels})
    first = _after(server, before, misses=2, hits=4)
    assert first["misses"] - before["misses"] == 2
    assert first["hits"] - before["hits"] == 4
    ner({"text": texts, "labels": labels})
    second = _after(server, first, misses=0, hits=6)
    assert second["misses"] == first["misses"] and second["hits"] - first["hits"] == 6
    assert 0 < second["size"] <= second["capacity"]
