"""Request handling against the running server: batching, truncation, bad input (the ColBERT
packages' shared tests)."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from vllm_factory.testing.requests import bad_text_requests

# What a package's test module collects (``from ... import *``).
__all__ = [
    "test_bad_input_gets_4xx_naming_the_field_and_server_keeps_serving",
    "test_base64_encoding_decodes_to_the_float_vectors",
    "test_batch_equals_one_request_per_text",
    "test_huge_text_is_truncated_to_document_length",
    "test_missing_data_is_a_4xx",
    "test_scoring_ranks_like_its_scores_and_batches_like_one_by_one",
    "test_single_text_gives_one_result",
    "test_vectors_are_normalised",
]

VALID = {"text": ["Late interaction keeps one vector per token.", "Short one."]}


def test_batch_equals_one_request_per_text(encode, corpus):
    documents = corpus["documents"][:6]
    batched = encode(documents, is_query=False)
    for text, together in zip(documents, batched):
        (alone,) = encode(text, is_query=False)
        np.testing.assert_allclose(alone, together, atol=1e-5)


@pytest.mark.parametrize("is_query", [True, False])
def test_base64_encoding_decodes_to_the_float_vectors(server, encode, corpus, is_query):
    texts = corpus["queries" if is_query else "documents"][:4]
    floats = encode(texts, is_query=is_query)
    response = server.pooling({"text": texts, "is_query": is_query, "encoding_format": "base64"})
    assert response.status_code == 200, response.text
    for item, expected in zip(response.json()["data"], floats):
        raw = base64.b64decode(item["embeddings"])
        vectors = np.frombuffer(raw, dtype="<f4").reshape(item["num_tokens"], item["dim"])
        assert vectors.shape == expected.shape
        # Two requests are two forwards: vLLM may batch them differently, and the CPU
        # attention kernel's summation order follows the batch (seen: 1.5e-7 apart).
        np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)


def test_single_text_gives_one_result(encode):
    (result,) = encode("What is ColBERT?", is_query=True)
    assert result.shape[0] == 32  # padded to the checkpoint's query_length by expansion
    np.testing.assert_allclose(np.linalg.norm(result, axis=1), 1.0, atol=1e-5)


def test_huge_text_is_truncated_to_document_length(encode):
    (result,) = encode("retrieval " * 10_000, is_query=False)  # 100,000 characters
    assert 0 < result.shape[0] <= 96  # the tiny checkpoint's document_length


BAD_REQUESTS = [
    *bad_text_requests(),
    ({"text": None}, "data.text"),
    ({"text": ["fine", ""]}, "data.text"),
    ({"text": "x", "is_query": "yes"}, "data.is_query"),
    ({"text": "x", "is_query": 1}, "data.is_query"),
    ({"text": "x", "encoding_format": "bytes"}, "data.encoding_format"),
    ({"text": ["x"] * 1025}, "data.text"),
    ({"text": "x" * 1_000_001}, "data.text"),
    ("just a string", "data"),
    ({"query": "q"}, "data.documents"),
    ({"query": "q", "documents": []}, "data.documents"),
    ({"query": "", "documents": ["d"]}, "data.query"),
    ({"query": "q", "documents": ["d"] * 10_000}, "data.documents"),
    ({"query": "q", "documents": ["d", 3]}, "data.documents"),
    ({"query": "q", "documents": ["d"], "top_k": 0}, "data.top_k"),
    ({"query": "q", "documents": ["d"], "text": "x"}, "data.text"),
]


def test_bad_input_gets_4xx_naming_the_field_and_server_keeps_serving(server, encode):
    before = encode(VALID["text"], is_query=False)
    for data, field in BAD_REQUESTS:
        response = server.pooling(data)
        assert 400 <= response.status_code < 500, (data, response.status_code, response.text)
        error = response.json()["error"]
        assert field in error["message"], (data, error)
        after = encode(VALID["text"], is_query=False)
        for old, new in zip(before, after):
            np.testing.assert_allclose(old, new, atol=1e-6)
    assert server.is_alive()


def test_missing_data_is_a_4xx(server):
    response = server.post("/pooling", {"model": server.model})
    assert 400 <= response.status_code < 500


@pytest.mark.parametrize("is_query", [True, False])
def test_vectors_are_normalised(encode, is_query):
    for vectors in encode(["Normalisation check, with punctuation!"], is_query=is_query):
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_scoring_ranks_like_its_scores_and_batches_like_one_by_one(server, corpus):
    documents = corpus["documents"][:8]
    body = {"query": corpus["queries"][0], "documents": documents, "top_k": 3}
    response = server.pooling(body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    scores = data["scores"]
    assert len(scores) == len(documents)
    best = sorted(range(len(scores)), key=lambda i: -scores[i])[:3]
    assert [item["index"] for item in data["top"]] == best
    assert [item["score"] for item in data["top"]] == [scores[i] for i in best]
    for i in (0, 5):
        alone = server.pooling({"query": corpus["queries"][0], "documents": [documents[i]]})
        assert alone.status_code == 200, alone.text
        np.testing.assert_allclose(alone.json()["data"]["scores"][0], scores[i], atol=1e-5)
