"""Fixtures: a tiny PyLate checkpoint + reference outputs (built in reference venvs), and a
real vLLM server serving it with the plugin."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import lfm2_colbert_reference as reference_build


def pytest_configure(config):
    config.addinivalue_line("markers", "parity: served outputs vs a reference library's")


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return reference_build.reference_dir()


@pytest.fixture(scope="session")
def checkpoint(reference_dir: Path) -> Path:
    return reference_dir / "checkpoint"


@pytest.fixture(scope="session")
def corpus() -> dict[str, list[str]]:
    data = json.loads(reference_build.CORPUS.read_text(encoding="utf-8"))
    return {
        "queries": [item["text"] for item in data["queries"]],
        "documents": [item["text"] for item in data["documents"]],
    }


@pytest.fixture(scope="session")
def reference(reference_dir: Path):
    """``reference(library)`` -> ``{"queries": [...], "documents": [...]}`` of ``[tokens, dim]``."""

    def load(library: str) -> dict[str, list[np.ndarray]]:
        data = np.load(reference_dir / f"ref-{library}.npz")
        out = {}
        for part, key in (("query", "queries"), ("document", "documents")):
            offsets, vectors = data[f"{part}_offsets"], data[f"{part}_vectors"]
            out[key] = [vectors[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
        return out

    return load
