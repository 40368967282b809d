"""Requests that once made a GLiNER server do unbounded work, build gigabytes or answer 500,
each answered now with a 4xx naming its field before the work, and the server still serving
the same answer to a valid request after them (the GLiNER family's ``server`` and ``ner``
fixtures; a package's ``tests/integration/test_hostile.py`` star-imports this module).

The budgets are the defaults of :mod:`vllm_factory.core.envs`; the tiny checkpoints read 48
words a text (more with a request's ``max_len``), so the scaled-up bodies here stay a few MB.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from vllm_factory.core import envs
from vllm_factory.testing.requests import assert_refused

LABELS = ["person", "organization", "location", "date", "product"]
WORDS = " ".join(f"Word{i} met Ada in Paris on day {i}." for i in range(40))  # 360 words
# The budgets below are met on texts read as their first max_len words (long_text
# "truncate"); read whole, the same bodies are refused for their windows first.
CUT = {"long_text": "truncate"}


def post_raw(server, body: str) -> httpx.Response:
    return httpx.post(f"{server.url}/pooling", content=body.encode("utf-8"),
                      headers={"content-type": "application/json"}, timeout=300)  # fmt: skip


def test_a_long_template_is_refused_before_any_label_is_built(server):
    """8 candidates and a 140,000-character template took 4.9 s and ~640 MB before its 400."""
    candidates = [{"id": i, "label": f"entity {i}"} for i in range(8)]
    data = {"text": "Ada met Babbage.", "candidates": candidates,
            "template": "{label}" + "." * 140_000}  # fmt: skip
    assert_refused(server, data, "data.template")


def test_many_candidates_with_long_labels_are_refused_by_budget(server):
    """2,048 candidates whose labels the template makes 4,000 characters each: within each
    label's limit, over the request's characters, refused before tokenizing."""
    candidates = [{"id": i, "label": f"entity {i}"} for i in range(2048)]
    data = {"text": "Ada met Babbage.", "candidates": candidates, "max_labels": 256,
            "template": "{label}" + "." * 3990}  # fmt: skip
    response = server.pooling(data)
    assert 400 <= response.status_code < 500, response.text
    assert "data.candidates" in response.text and envs.MAX_REQUEST_CHARS.name in response.text


def test_a_threshold_of_zero_keeps_a_bounded_number_of_candidates(server):
    """threshold 0 and multi-label: every span x label cell passes (64 texts x 96 words x
    width x 20 labels here); refused, naming the threshold, before the model runs (it was
    refused only after the model had scored every cell); a threshold just above 0 is refused once the scores are counted, before they become
    Python objects."""
    labels = [f"label {i}" for i in range(20)]
    data = {"text": [WORDS] * 64, "labels": labels, "threshold": 0.0, "multi_label": True,
            "flat_ner": False, **CUT}  # fmt: skip
    response = server.pooling(data)
    assert 400 <= response.status_code < 500, response.text
    assert "data.threshold" in response.text and "above a threshold of 0" in response.text
    assert envs.MAX_ENTITIES.name in response.text, response.text
    assert_refused(server, {**data, "threshold": 1e-30}, "data.threshold")
    small = {**data, "text": WORDS[:60], "labels": labels[:2]}  # few cells: answered
    assert server.pooling(small).status_code == 200


def test_return_scores_is_bounded(server):
    """64 texts x 48 words x width 8 x 50 labels: more scores than a request may ask back."""
    data = {"text": [WORDS] * 64, "labels": [f"l{i}" for i in range(50)], "return_scores": True,
            **CUT}  # fmt: skip
    response = server.pooling(data)
    assert 400 <= response.status_code < 500 and "data.return_scores" in response.text, (
        response.text
    )


def test_cells_scored_are_bounded(server):
    """256 texts of 100 words, 256 labels: more span x label cells than a request may score."""
    data = {"text": [WORDS] * 256, "labels": [f"l{i}" for i in range(256)], "max_len": 100,
            **CUT}  # fmt: skip
    response = server.pooling(data)
    assert 400 <= response.status_code < 500, response.text
    assert "data.text" in response.text and envs.GLINER_MAX_CELLS.name in response.text


def test_per_prompt_data_is_bounded(server):
    """vLLM gives every prompt of a request the request's one set of pooling parameters, so
    each prompt carries every prompt's word layout: 1,024 prompts (16 texts x 64 label chunks)
    of 16 words would send ~71 MB, within the cell budget but over this one. (A bi-encoder's
    prompts are its texts, at most 256: its data stays under the budget; not run there.)"""
    texts = [" ".join(f"w{i}" for i in range(t, t + 16)) for t in range(16)]
    candidates = [{"id": i, "label": f"e{i}"} for i in range(1024)]
    data = {"text": texts, "candidates": candidates, "max_labels": 16}
    response = server.pooling(data)
    assert 400 <= response.status_code < 500, response.text
    assert "data.text" in response.text, response.text
    assert envs.MAX_PROMPT_DATA_BYTES.name in response.text, response.text


def test_characters_read_are_bounded(server):
    """max_len lets a text be read far past the checkpoint's words: 32 texts of 100,000
    characters are more than a request may tokenize."""
    text = ("Ada Lovelace wrote notes in London. " * 3000)[:100_000]
    data = {"text": [text] * 32, "labels": LABELS, "max_len": 100_000}
    response = server.pooling(data)
    assert 400 <= response.status_code < 500, response.text
    assert "data.text" in response.text and envs.MAX_REQUEST_CHARS.name in response.text


@pytest.mark.parametrize("where", ["text", "labels", "key"])
def test_lone_surrogates_are_refused_naming_the_field(server, where):
    """JSON may escape a lone UTF-16 surrogate; no tokenizer takes one (the 400 used to carry
    the tokenizer's internal error)."""
    data = {"text": "caf\\ud800e", "labels": ["person"]}
    if where == "labels":
        data = {"text": "cafe", "labels": ["per\\udc00son"]}
    body = json.dumps({"model": server.model, "data": data}).replace("\\\\u", "\\u")
    if where == "key":
        body = body.replace('"labels"', '"lab\\ud800els"')
    response = post_raw(server, body)
    assert 400 <= response.status_code < 500, response.text
    assert "surrogate" in response.text and "data." in response.text


def test_a_prompt_truncated_by_vllm_is_a_client_error(server):
    """A top-level ``truncate_prompt_tokens`` makes vLLM cut the IOProcessor's prompts; the
    head then scores nothing for them: a 4xx naming the text (it was a 500)."""
    body = {"model": server.model, "data": {"text": WORDS, "labels": LABELS},
            "truncate_prompt_tokens": 5}  # fmt: skip
    response = httpx.post(f"{server.url}/pooling", json=body, timeout=120)
    assert 400 <= response.status_code < 500, response.text
    assert "data.text" in response.text


def test_a_request_id_may_be_reused_once_answered(server):
    body = {"model": server.model, "data": {"text": "Ada met Babbage.", "labels": LABELS},
            "request_id": "client-chosen"}  # fmt: skip
    for _ in range(2):
        response = httpx.post(f"{server.url}/pooling", json=body, timeout=120)
        assert response.status_code == 200, response.text


def test_requests_at_the_limits_together_are_answered(server):
    """The engine's worst case: four requests each as large as the cell budget lets it be (a
    bi-encoder's 2,048 labels, or a few dozen, within a uni-encoder's label prompt, on texts of
    the checkpoint's words), sent together with different label counts, so that an engine
    step holds prompts of several of them. Each is answered, and the server keeps serving.
    Until the span scoring went a chunk of prompts at a time against their own labels, every
    span of a step was dotted with every label of the step: a bi-encoder's step of these
    asked for words x width x (prompts x 2,048) cells, tens of GB."""
    config = json.loads((Path(server.model) / "gliner_config.json").read_text())
    words, width = int(config["max_len"]), int(config["max_width"])
    labels_each = 2048 - 3 if config.get("labels_encoder") else 24
    text = " ".join(f"w{i}" for i in range(words))
    cells = envs.get(envs.GLINER_MAX_CELLS)

    def send(k: int) -> httpx.Response:
        labels = [f"x{k}{i}" for i in range(labels_each + k)]
        texts = min(256, cells // (words * width * len(labels)))
        # one window per text, as many as the cells allow: cut where the label prompt leaves
        # no more tokens (read whole, each text would be several windows past the budget)
        data = {"text": [text] * texts, "labels": labels, "threshold": 1.0, **CUT}
        return httpx.post(f"{server.url}/pooling", json={"model": server.model, "data": data},
                          timeout=600)  # fmt: skip

    with ThreadPoolExecutor(4) as pool:
        responses = list(pool.map(send, range(4)))
    for response in responses:
        assert response.status_code == 200, response.text[:500]
        assert len(response.json()["data"]) > 1
    assert server.is_alive()


def test_the_server_answers_the_same_after_all_of_them(server, ner, corpus):
    data = {"text": corpus["texts"][:6], "labels": LABELS, "threshold": 0.3}
    before = ner(data)
    test_a_long_template_is_refused_before_any_label_is_built(server)
    test_a_threshold_of_zero_keeps_a_bounded_number_of_candidates(server)
    test_a_prompt_truncated_by_vllm_is_a_client_error(server)
    assert server.is_alive()
    keys = [[(e["text"], e["label"], e["start"], e["end"]) for e in text] for text in ner(data)]
    assert keys == [[(e["text"], e["label"], e["start"], e["end"]) for e in t] for t in before]


__all__ = [name for name in dir() if name.startswith("test_")]
