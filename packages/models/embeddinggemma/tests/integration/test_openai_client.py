"""The same server answers the OpenAI embeddings API, called through the ``openai`` library."""

from __future__ import annotations

import numpy as np
import openai
from vllm_factory.testing.parity import cosine_rows


def test_openai_client_embeddings(server, reference, texts):
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused")
    prompt = reference.meta["prompts"]["query"]
    inputs = [prompt + text for text in texts[:8]]

    full = client.embeddings.create(model=server.model, input=inputs)
    assert [item.index for item in full.data] == list(range(len(inputs)))
    vectors = np.asarray([item.embedding for item in full.data])
    assert vectors.shape == (len(inputs), reference.meta["dimension"])
    assert cosine_rows(vectors, reference("query")[:8]).min() >= 0.99999
    assert full.usage.prompt_tokens == int(reference.num_tokens("query")[:8].sum())

    cut = client.embeddings.create(model=server.model, input=inputs, dimensions=32)
    small = np.asarray([item.embedding for item in cut.data])
    assert small.shape == (len(inputs), 32)
    # OpenAI semantics: unit vectors at every size (sentence-transformers' direction).
    np.testing.assert_allclose(np.linalg.norm(small, axis=1), 1.0, atol=1e-5)
    assert cosine_rows(small, reference("query", 32)[:8]).min() >= 0.99999


def test_openai_client_undeclared_dimensions_is_a_4xx(server):
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    try:
        client.embeddings.create(model=server.model, input="hello", dimensions=48)
    except openai.BadRequestError as error:
        assert "48" in str(error)
    else:
        raise AssertionError("dimensions=48 is not declared and must be refused")
