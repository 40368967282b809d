"""Request handling against the running server: batching, truncation, bad input (the ColBERT
packages' shared tests)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from vllm_factory.heads.colbert.vectors import decode_vectors
from vllm_factory.testing.requests import bad_text_requests

# What a package's test module collects (``from ... import *``).
__all__ = [
    "test_bad_input_gets_4xx_naming_the_field_and_server_keeps_serving",
    "test_base64_encoding_decodes_to_the_float_vectors",
    "test_batch_equals_one_request_per_text",
    "test_float_vectors_are_written_as_float32",
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


# Relative bound of a base64 number in each embed_dtype: half a unit in the last place for the
# rounding, and one more for two forwards' float32 noise (1.5e-7) landing across a boundary.
EMBED_DTYPE_RTOL = {"float32": 0.0, "float16": 2.0**-10, "bfloat16": 2.0**-7}


@pytest.mark.parametrize("embed_dtype", list(EMBED_DTYPE_RTOL))
@pytest.mark.parametrize("is_query", [True, False])
def test_base64_encoding_decodes_to_the_float_vectors(
    server, encode, corpus, is_query, embed_dtype
):
    texts = corpus["queries" if is_query else "documents"][:4]
    floats = encode(texts, is_query=is_query)
    data = {"text": texts, "is_query": is_query, "encoding_format": "base64"}
    if embed_dtype != "float32":
        data["embed_dtype"] = embed_dtype
    response = server.pooling(data)
    assert response.status_code == 200, response.text
    for item, expected in zip(response.json()["data"], floats):
        assert item.get("dtype", "float32") == embed_dtype
        raw = base64.b64decode(item["embeddings"])
        assert len(raw) == (2 if embed_dtype != "float32" else 4) * expected.size
        vectors = decode_vectors(item)
        assert vectors.shape == expected.shape
        # Two requests are two forwards: vLLM may batch them differently, and the CPU
        # attention kernel's summation order follows the batch (seen: 1.5e-7 apart).
        np.testing.assert_allclose(vectors, expected, rtol=EMBED_DTYPE_RTOL[embed_dtype], atol=1e-6)


def significant_digits(number: str) -> int:
    mantissa = number.lstrip("-").lower().split("e")[0].replace(".", "")
    return len(mantissa.lstrip("0").rstrip("0")) if mantissa.strip("0") else 1


def test_float_vectors_are_written_as_float32(server):
    """The server hands vLLM's renderer (orjson) the arrays: every number in float32's shortest
    form (at most 9 significant digits) rather than the float64 form of a list (up to 17),
    which is 2.6x the API process's work and 1.8x the bytes for a 512-token document."""
    response = server.pooling({"text": VALID["text"], "is_query": False})
    assert response.status_code == 200, response.text
    items = json.loads(response.text, parse_float=str)["data"]
    numbers = [n for item in items for row in item["embeddings"] for n in row]
    assert numbers and max(significant_digits(n) for n in numbers) <= 9


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
    ({"text": "x", "encoding_format": "base64", "embed_dtype": "int4"}, "data.embed_dtype"),
    ({"text": "x", "embed_dtype": "int8", "calibration": [[0.0], [1.0]]}, "data.calibration"),
    ({"text": "x", "embed_dtype": "binary", "calibration": [[0], [1]]}, "data.calibration"),
    ({"text": "x", "embed_dtype": "float16"}, "data.embed_dtype"),
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
