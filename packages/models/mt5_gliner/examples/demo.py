"""Demo: prepare a tiny GLiNER (mT5 encoder) with vllm-factory-prep, serve it with vLLM
(no plugin flags: the prepared config.json names mt5_gliner_io) and extract entities.
See :mod:`vllm_factory.testing.gliner.demo`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import mt5_gliner_reference
from vllm_factory.testing.gliner.demo import run_demo

if __name__ == "__main__":
    run_demo(mt5_gliner_reference)
