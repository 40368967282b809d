"""Demo: entity linking on a vLLM server with a tiny GLiNER bi-encoder (the GLiNER linker
models' shape: DeBERTa text and label encoders): the server's linking request, then glinker's
own pipeline with its GLiNER layers served vs in process.
See :func:`vllm_factory.testing.gliner.demo.run_linking_demo`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import deberta_gliner_reference
from vllm_factory.testing.gliner.demo import run_linking_demo

if __name__ == "__main__":
    run_linking_demo(deberta_gliner_reference.BI_ENCODER)
