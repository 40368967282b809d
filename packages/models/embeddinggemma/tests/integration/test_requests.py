"""Request handling against the running server: batching, truncation, bad input."""

from __future__ import annotations

import numpy as np
from vllm_factory.testing.requests import bad_text_requests

VALID = ["A bidirectional encoder.", "Short one."]


def test_batch_equals_one_request_per_text(embed, texts):
    batch = texts[20:26]
    together, _ = embed(batch, prompt_name="document")
    for text, row in zip(batch, together):
        alone, _ = embed(text, prompt_name="document")
        np.testing.assert_allclose(alone[0], row, atol=1e-5)


def test_single_text_gives_one_unit_vector(embed, reference):
    vectors, num_tokens = embed("What is EmbeddingGemma?", prompt_name="query")
    assert vectors.shape == (1, reference.meta["dimension"])
    assert num_tokens[0] > 2
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_huge_text_is_truncated_to_max_seq_length(embed, reference):
    vectors, num_tokens = embed("retrieval " * 10_000)  # 100,000 characters
    assert num_tokens[0] == reference.meta["max_seq_length"]
    assert np.isfinite(vectors).all()


BAD_REQUESTS = [
    *bad_text_requests(),
    ({"text": None}, "data.text"),
    ({"text": ["fine", ""]}, "data.text"),
    ({"text": ["x"] * 1025}, "data.text"),
    ({"text": "x" * 1_000_001}, "data.text"),
    ({"text": "x", "prompt_name": "nope"}, "data.prompt_name"),
    ({"text": "x", "prompt_name": 3}, "data.prompt_name"),
    ({"text": "x", "prompt_name": ["query"]}, "data.prompt_name"),
    ({"text": "x", "dimensions": 48}, "data.dimensions"),
    ({"text": "x", "dimensions": 0}, "data.dimensions"),
    ({"text": "x", "dimensions": -32}, "data.dimensions"),
    ({"text": "x", "dimensions": 10**30}, "data.dimensions"),
    ({"text": "x", "dimensions": "64"}, "data.dimensions"),
    ({"text": "x", "dimensions": 64.0}, "data.dimensions"),
    ({"text": "x", "dimensions": True}, "data.dimensions"),
    ("just a string", "data"),
    ([{"text": "x"}], "data"),
]


def test_bad_input_gets_4xx_naming_the_field_and_server_keeps_serving(server, embed):
    before, _ = embed(VALID, prompt_name="query", dimensions=64)
    for data, field in BAD_REQUESTS:
        response = server.pooling(data)
        assert 400 <= response.status_code < 500, (data, response.status_code, response.text)
        error = response.json()["error"]
        assert field in error["message"], (data, error)
    after, _ = embed(VALID, prompt_name="query", dimensions=64)
    np.testing.assert_allclose(before, after, atol=1e-6)
    assert server.is_alive()


def test_missing_data_is_a_4xx(server):
    response = server.post("/pooling", {"model": server.model})
    assert 400 <= response.status_code < 500


def test_v1_embeddings_bad_input_is_a_4xx(server):
    for body in (
        {"model": server.model, "input": "x", "dimensions": 48},
        {"model": server.model, "input": []},
        {"model": server.model, "input": 3.5},
        {"model": server.model, "input": "word " * 5000},  # longer than --max-model-len
    ):
        response = server.post("/v1/embeddings", body)
        assert 400 <= response.status_code < 500, (body, response.status_code, response.text)
    assert server.is_alive()


def test_refusals_are_counted_on_metrics_by_field_and_reason(server):
    before = server.refusals()
    for dimensions in (48, 0, "64"):
        assert server.pooling({"text": "x", "dimensions": dimensions}).status_code == 400
    assert server.pooling({"text": ["fine", ""]}).status_code == 400
    after = server.refusals()
    key = ("data.dimensions", "invalid")
    assert after[key] - before.get(key, 0.0) == 3
    key = ("data.text", "invalid")  # data.text[1] is counted under its field
    assert after[key] - before.get(key, 0.0) == 1
