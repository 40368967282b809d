"""The ColBERT packages' demo: serve a tiny checkpoint with the plugin, send a query and two
documents, print the vector shapes and the MaxSim scores.

``run_demo(reference, io_processor, architecture)`` builds the package's tiny checkpoint
offline (PyLate's own classes, in its own venv, through the package's reference module),
starts a real vLLM OpenAI server with ``--io-processor-plugin io_processor``, queries it and
stops it. The weights are random: the scores show the request/response shape, not a trained
model's ranking. Needs vLLM, httpx and numpy.
"""

from __future__ import annotations

import logging
from types import ModuleType

import numpy as np
from vllm_factory.testing.server import VllmServer

QUERY = "How does late interaction score documents?"
DOCUMENTS = [
    "Late interaction keeps one vector per token and scores with MaxSim over them.",
    "The bakery on the corner sells croissants every morning.",
]


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    """Sum over query tokens of the best dot product with any document token."""
    return float((query @ document.T).max(axis=1).sum())


def run_demo(reference: ModuleType, io_processor: str, architecture: str) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    checkpoint = reference.reference_dir() / "checkpoint"
    with VllmServer(
        checkpoint, io_processor_plugin=io_processor, hf_overrides={"architectures": [architecture]}
    ) as server:
        print(f"server healthy after {server.startup_seconds:.1f} s at {server.url}")
        # One text: its token vectors; a list of texts: one item per text.
        q = np.asarray(server.show_pooling({"text": QUERY, "is_query": True}))
        documents = server.show_pooling({"text": DOCUMENTS, "is_query": False})
        print(f"query: {q.shape[0]} token vectors of dim {q.shape[1]}")
        for text, item in zip(DOCUMENTS, documents):
            d = np.asarray(item["embeddings"])
            print(f"document {d.shape[0]:>3} x {d.shape[1]}  MaxSim {maxsim(q, d):8.4f}  {text}")
