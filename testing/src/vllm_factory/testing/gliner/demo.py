"""The GLiNER packages' demo: prepare a tiny gliner checkpoint, serve it, extract entities.

``run_demo(reference)`` builds the package's tiny checkpoint offline (gliner's own classes, in
its own venv, through the package's reference module), runs ``vllm-factory-prep`` on it as a
user would, starts a real vLLM OpenAI server on the prepared directory (config.json names the
architecture and the IOProcessor, so no plugin flags), sends one NER request and prints the
entities. The weights are random: the entities show the request/response shape, not a trained
model's judgement. Needs vLLM and httpx.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from vllm_factory.testing.server import VllmServer

TEXT = "Marie Curie worked in Paris with Pierre Curie and won the Nobel Prize in 1903."
LABELS = ["person", "city", "award", "date"]


def run_demo(reference: ModuleType) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    checkpoint = reference.reference_dir() / "checkpoint"
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp) / "served"
        prep = shutil.which("vllm-factory-prep", path=str(Path(sys.executable).parent))
        command = [prep] if prep else [sys.executable, "-m", "vllm_factory.heads.gliner.prep"]
        subprocess.run([*command, str(checkpoint), str(served)], check=True)
        with VllmServer(served) as server:
            print(f"server healthy after {server.startup_seconds:.1f} s at {server.url}")
            (entities,) = server.show_pooling({"text": TEXT, "labels": LABELS, "threshold": 0.5})
            print(f"{len(entities)} entities")
            for entity in entities:
                print(
                    f"  [{entity['start']:>3}, {entity['end']:>3}) {entity['label']:<7}"
                    f" {entity['score']:.3f}  {entity['text']!r}"
                )
