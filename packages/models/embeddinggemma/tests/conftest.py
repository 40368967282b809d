"""Fixtures: a tiny EmbeddingGemma checkpoint + sentence-transformers' outputs for it (both built
in the reference venv), and the parity corpus."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import embeddinggemma_reference as reference_build


def pytest_configure(config):
    config.addinivalue_line("markers", "parity: served outputs vs a reference library's")


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return reference_build.reference_dir()


@pytest.fixture(scope="session")
def checkpoint(reference_dir: Path) -> Path:
    return reference_dir / "checkpoint"


@pytest.fixture(scope="session")
def texts() -> list[str]:
    data = json.loads(reference_build.CORPUS.read_text(encoding="utf-8"))
    return [item["text"] for item in data["texts"]]


@pytest.fixture(scope="session")
def reference(reference_dir: Path):
    """``reference(prompt_name, dims)`` -> sentence-transformers' ``[n, dims]`` embeddings;
    ``reference.meta`` and ``reference.num_tokens(prompt_name)`` for the rest;
    ``reference(..., dtype="bfloat16")``: sentence-transformers' own bf16 run."""
    data = {"float32": np.load(reference_dir / "ref-st.npz")}
    if (reference_dir / "ref-st-bf16.npz").exists():
        data["bfloat16"] = np.load(reference_dir / "ref-st-bf16.npz")

    class Reference:
        meta = json.loads(str(data["float32"]["meta_json"]))

        def __call__(
            self, prompt_name: str | None, dims: int | None = None, dtype: str = "float32"
        ) -> np.ndarray:
            return data[dtype][f"emb__{prompt_name or 'none'}__{dims or 'full'}"]

        def num_tokens(self, prompt_name: str | None) -> np.ndarray:
            return data["float32"][f"num_tokens__{prompt_name or 'none'}"]

    return Reference()
