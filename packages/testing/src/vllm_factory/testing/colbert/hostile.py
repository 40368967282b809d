"""Requests that once held a ColBERT server's API process for seconds, answered now after
tokenizing only what the model reads (the ColBERT family's ``server`` and ``encode``
fixtures; a package's ``tests/integration/test_hostile.py`` star-imports this module)."""

from __future__ import annotations

import json

import httpx
import numpy as np


def test_megabyte_documents_are_read_only_as_far_as_the_model_reads(encode):
    """1,000,000-character documents were tokenized whole (1.4 s each on the event loop) before
    truncation; now only the part the document length reads is, and the vectors are the same
    as for that part alone."""
    prose = " ".join(f"word{i % 500} and more text about item {i}." for i in range(60_000))
    texts = [prose[:1_000_000], ("x" * 60 + " ") * 16_000]
    whole = encode(texts, False)
    cut = encode([text[:20_000] for text in texts], False)
    for a, b in zip(whole, cut):
        assert a.shape == b.shape and np.allclose(a, b, atol=1e-6)


def test_lone_surrogates_name_the_field(server):
    body = json.dumps({"model": server.model, "data": {"text": ["ok", "caf\\ud800e"]}})
    response = httpx.post(f"{server.url}/pooling", content=body.replace("\\\\u", "\\u").encode(),
                          headers={"content-type": "application/json"}, timeout=60)  # fmt: skip
    assert response.status_code == 400, response.text
    assert "data.text.1" in response.text and "surrogate" in response.text


__all__ = [name for name in dir() if name.startswith("test_")]
