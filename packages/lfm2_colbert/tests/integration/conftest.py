from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vllm_factory.core.testing.server import VllmServer

ARCHITECTURE = "Lfm2ColBERTForRetrieval"


@pytest.fixture(scope="session")
def server(checkpoint: Path):
    """One real vLLM OpenAI server with the plugin for the whole test session."""
    with VllmServer(
        checkpoint,
        io_processor_plugin="lfm2_colbert_io",
        hf_overrides={"architectures": [ARCHITECTURE]},
    ) as running:
        print(f"\nvLLM server healthy after {running.startup_seconds:.1f} s")
        yield running


@pytest.fixture(scope="session")
def encode(server: VllmServer):
    """``encode(texts, is_query)`` through POST /pooling -> list of ``[tokens, dim]`` arrays."""

    def run(texts: list[str] | str, is_query: bool) -> list[np.ndarray]:
        response = server.pooling({"text": texts, "is_query": is_query})
        assert response.status_code == 200, response.text
        items = response.json()["data"]
        for item in items:
            assert item["num_tokens"] == len(item["embeddings"])
        return [np.asarray(item["embeddings"], dtype=np.float32) for item in items]

    return run
