"""Fixtures: the tiny PyLate checkpoint + reference outputs (built in reference venvs), then
the shared ColBERT suite's session fixtures (one real vLLM server with the plugin)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import lfm2_colbert_reference
from vllm_factory.heads.colbert.testing.fixtures import (  # noqa: F401  (fixtures)
    ColBERTPackage,
    add_parity_marker,
    checkpoint,
    corpus,
    encode,
    reference,
    reference_dir,
    server,
    st_layout_server,
)


def pytest_configure(config):
    add_parity_marker(config)


@pytest.fixture(scope="session")
def colbert_package() -> ColBERTPackage:
    return ColBERTPackage(lfm2_colbert_reference, "lfm2_colbert_io", "Lfm2ColBERTForRetrieval")
