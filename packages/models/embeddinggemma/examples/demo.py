"""Demo: serve a tiny EmbeddingGemma with the plugin, embed a query and two documents.

Builds the tiny checkpoint offline (sentence-transformers' own classes, in its own venv),
starts a real vLLM OpenAI server with ``--io-processor-plugin embeddinggemma_io``, embeds a
query (prompt "query") and two documents (prompt "document") at full size and at 32
Matryoshka dimensions, prints the cosine similarities, then asks ``/v1/embeddings`` the same.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import embeddinggemma_reference as reference_build
from vllm_factory.testing.server import VllmServer

QUERY = "How do Matryoshka embeddings save space?"
DOCUMENTS = [
    "Matryoshka embeddings keep the most useful information in the leading dimensions.",
    "The bakery on the corner sells croissants every morning.",
]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    checkpoint = reference_build.reference_dir() / "checkpoint"
    with VllmServer(
        checkpoint,
        io_processor_plugin="embeddinggemma_io",
        hf_overrides={"architectures": ["EmbeddingGemmaForEmbedding"]},
    ) as server:
        print(f"server healthy after {server.startup_seconds:.1f} s at {server.url}")
        for dimensions in (None, 32):
            query_body = {"text": QUERY, "prompt_name": "query", "dimensions": dimensions}
            document_body = {"text": DOCUMENTS, "prompt_name": "document", "dimensions": dimensions}
            q = np.asarray(server.show_pooling(query_body))  # one text: its vector
            for text, item in zip(DOCUMENTS, server.show_pooling(document_body)):
                d = np.asarray(item["embedding"])
                print(f"dim {len(q):>4}  cosine {cosine(q, d):7.4f}  {text}")
        response = server.post("/v1/embeddings", {"model": server.model, "input": DOCUMENTS})
        response.raise_for_status()
        sizes = [len(item["embedding"]) for item in response.json()["data"]]
        print(f"POST /v1/embeddings: {len(sizes)} vectors of size {sizes[0]}")


if __name__ == "__main__":
    main()
