from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vllm_factory.testing.server import VllmServer

ARCHITECTURE = "EmbeddingGemmaForEmbedding"


@pytest.fixture(scope="session")
def server(checkpoint: Path):
    """One real vLLM OpenAI server with the plugin for every test that needs it."""
    with VllmServer(
        checkpoint,
        io_processor_plugin="embeddinggemma_io",
        hf_overrides={"architectures": [ARCHITECTURE]},
    ) as running:
        print(f"\nvLLM server (plugin) healthy after {running.startup_seconds:.1f} s")
        yield running


@pytest.fixture(scope="session")
def embed(server: VllmServer):
    """``embed(texts, prompt_name=None, dimensions=None)`` through POST /pooling ->
    ``([n, dims] array, [n] token counts)``. One text goes as a list of one, whose item has its
    token count (a string is answered with the bare vector: ``test_seed_readme``)."""

    def run(texts, prompt_name=None, dimensions=None):
        data = {"text": [texts] if isinstance(texts, str) else texts}
        if prompt_name is not None:
            data["prompt_name"] = prompt_name
        if dimensions is not None:
            data["dimensions"] = dimensions
        response = server.pooling(data)
        assert response.status_code == 200, response.text
        items = response.json()["data"]
        vectors = np.asarray([item["embedding"] for item in items], dtype=np.float32)
        return vectors, np.asarray([item["num_tokens"] for item in items])

    return run
