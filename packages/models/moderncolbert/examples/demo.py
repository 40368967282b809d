"""Demo: serve a tiny ModernColBERT with the plugin, send a query and two documents.

Builds the tiny checkpoint offline (PyLate's own classes, in its own venv), starts a real
vLLM OpenAI server with ``--io-processor-plugin moderncolbert_io``, prints the vector shapes
and the MaxSim scores, then stops the server. Run it through ``nox -s demo``; see
:mod:`vllm_factory.testing.colbert.demo`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import moderncolbert_reference
from vllm_factory.testing.colbert.demo import run_demo

if __name__ == "__main__":
    run_demo(moderncolbert_reference, "moderncolbert_io", "ModernColBERTForRetrieval")
