"""Requests that once held the API process for seconds, answered now after tokenizing only
what the model reads."""

from __future__ import annotations

import json

import httpx
import numpy as np


def test_megabyte_texts_are_read_only_as_far_as_the_model_reads(server):
    prose = " ".join(f"word{i % 500} and more text about item {i}." for i in range(60_000))
    texts = [prose[:1_000_000], ("x" * 60 + " ") * 16_000]
    whole = server.pooling({"text": texts})
    cut = server.pooling({"text": [text[:20_000] for text in texts]})
    assert whole.status_code == cut.status_code == 200, whole.text
    for a, b in zip(whole.json()["data"], cut.json()["data"]):
        assert a["num_tokens"] == b["num_tokens"]
        assert np.allclose(a["embedding"], b["embedding"], atol=1e-6)


def test_lone_surrogates_name_the_field(server):
    body = json.dumps({"model": server.model, "data": {"text": "caf\\ud800e"}})
    response = httpx.post(f"{server.url}/pooling", content=body.replace("\\\\u", "\\u").encode(),
                          headers={"content-type": "application/json"}, timeout=60)  # fmt: skip
    assert response.status_code == 400, response.text
    assert "data.text" in response.text and "surrogate" in response.text
