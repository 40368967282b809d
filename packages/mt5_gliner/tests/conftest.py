"""Fixtures: a tiny mT5 gliner checkpoint + reference outputs (built in the gliner venv)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import mt5_gliner_reference as reference_build


def pytest_configure(config):
    config.addinivalue_line("markers", "parity: served outputs vs a reference library's")


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return reference_build.reference_dir()


@pytest.fixture(scope="session")
def corpus() -> dict:
    return json.loads(reference_build.CORPUS.read_text(encoding="utf-8"))
