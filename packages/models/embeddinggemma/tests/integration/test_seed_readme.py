"""vLLM Factory 0.2's README for EmbeddingGemma (:mod:`vllm_factory.testing.seed`): its serve
command refuses the sentence-transformers checkpoint in one line naming the flag to add, and with
it the README's request gets the vector its users read from ``data``."""

from __future__ import annotations

import pytest
from vllm_factory.testing.seed import (
    assert_refused,
    cosine,
    dumps,
    is_vector,
    norm,
    post,
    readme_server,
)

PLUGIN = "embeddinggemma_io"
FLAG = """--hf-overrides {"architectures": ["EmbeddingGemmaForEmbedding"]}"""
README_REQUEST = {"text": "What is the knapsack problem?"}


@pytest.fixture(scope="module")
def readme_gemma(checkpoint):
    flag, value = FLAG.split(" ", 1)
    with readme_server(checkpoint, PLUGIN, flag, value) as server:
        yield server


def test_readme_serve_command_refuses_in_one_line_naming_the_flag(checkpoint):
    """The checkpoint's config.json names vLLM's own Gemma3TextModel: without the flag vLLM
    would serve it, answering every request with 400."""
    server = readme_server(checkpoint, PLUGIN, eager=True)
    assert_refused(server, """--hf-overrides '{"architectures": ["EmbeddingGemmaForEmbedding"]}'""")


def test_readme_request_gets_the_vector(readme_gemma):
    data = post(readme_gemma, README_REQUEST)
    assert is_vector(data), dumps(data)
    assert abs(norm(data) - 1) < 1e-2  # normalised, bf16


def test_a_readme_style_client_compares_texts_by_cosine(readme_gemma, texts):
    """One request per text, a cosine over ``data``; the list form's vectors are the same."""
    vectors = [post(readme_gemma, {"text": text}) for text in texts[:3]]
    items = post(readme_gemma, {"text": texts[:3]})
    for vector, item in zip(vectors, items):
        assert sorted(item) == ["embedding", "num_tokens"]
        assert cosine(vector, item["embedding"]) > 0.999
    assert abs(cosine(vectors[0], vectors[0]) - 1) < 1e-6
    assert all(-1.0 <= cosine(vectors[0], other) <= 1.0 for other in vectors[1:])
