"""GLiNER2 requests that once made the API process rank every span of every grid against every
span kept (a threshold of 0) or tokenize a whole long text before refusing it, answered now
within their bounds (the GLiNER2 family's ``server`` fixture, ``--max-model-len`` 512; a
package's ``tests/integration/test_hostile.py`` star-imports this module)."""

from __future__ import annotations

import json

import httpx
from vllm_factory.core import envs

# ~110 words: schema and text fit the tiny checkpoint's 512 tokens.
TEXT = " ".join(f"Ada Lovelace met Charles Babbage in London in {1800 + i}." for i in range(12))
TYPES = [f"type {i}" for i in range(20)]


def refused(response: httpx.Response, field: str) -> str:
    assert 400 <= response.status_code < 500, response.text
    message = response.json()["error"]["message"]
    assert field in message, message
    return message


def test_a_threshold_of_zero_keeps_a_bounded_number_of_candidates(server):
    data = {"text": [TEXT] * 64, "entities": TYPES, "threshold": 0.0}
    message = refused(server.pooling(data), "data.threshold")
    assert envs.MAX_ENTITIES.name in message
    small = {"text": TEXT[:200], "entities": TYPES[:2], "threshold": 0.0}
    assert server.pooling(small).status_code == 200


def test_return_scores_is_bounded(server):
    data = {"text": [TEXT] * 64, "entities": TYPES, "return_scores": True}
    refused(server.pooling(data), "data.return_scores")


def test_a_text_of_more_words_than_the_server_takes_is_refused_before_tokenizing(server):
    data = {"text": "word " * 19_999, "entities": ["x"], "long_text": "error"}
    message = refused(server.pooling(data), "data.text")
    assert "--max-model-len" in message, message
    # Read in windows (the default), the same text is bounded by the windows it needs.
    data = {"text": ["word " * 19_999] * 64, "entities": ["x"]}
    message = refused(server.pooling(data), "data.text")
    assert envs.MAX_WINDOWS.name in message or envs.MAX_REQUEST_CHARS.name in message, message


def test_an_unknown_runtime_or_a_lone_surrogate_names_its_field(server):
    refused(server.pooling({"text": TEXT, "entities": ["x"], "runtime": "onnx"}), "data.runtime")
    body = json.dumps({"model": server.model, "data": {"text": "x", "entities": ["pe\\ud800"]}})
    response = httpx.post(f"{server.url}/pooling", content=body.replace("\\\\u", "\\u").encode(),
                          headers={"content-type": "application/json"}, timeout=60)  # fmt: skip
    refused(response, "data.entities.0")


__all__ = [name for name in dir() if name.startswith("test_")]
