"""Demo: serve a tiny LFM2-ColBERT with the plugin, send a query and two documents.

Builds the tiny checkpoint offline (PyLate's own classes, in its own venv), starts a real
vLLM OpenAI server with ``--io-processor-plugin lfm2_colbert_io``, prints the vector shapes
and the MaxSim scores, then stops the server. Run it in a venv with vLLM and this wheel
(``nox -s build -- --serve`` does); see :mod:`vllm_factory.testing.colbert.demo`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import lfm2_colbert_reference
from vllm_factory.testing.colbert.demo import run_demo

if __name__ == "__main__":
    run_demo(lfm2_colbert_reference, "lfm2_colbert_io", "Lfm2ColBERTForRetrieval")
