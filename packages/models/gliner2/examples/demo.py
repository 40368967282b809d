"""Demo: build a tiny GLiNER2 (DeBERTa-v3 encoder) with the gliner2 library, serve the
library's own directory with vLLM (--config-format gliner2) and extract entities, classes,
records and relations. See :mod:`vllm_factory.testing.gliner2.demo`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import gliner2_reference
from vllm_factory.testing.gliner2.demo import run_demo

if __name__ == "__main__":
    run_demo(gliner2_reference)
