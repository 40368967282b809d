"""Fixtures: the tiny DeBERTa-v3 gliner checkpoint + gliner's outputs (built in the gliner venv),
then the shared GLiNER suite's session fixtures (prepared checkpoint, one vLLM server)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import deberta_gliner_reference
from vllm_factory.heads.gliner.testing.fixtures import (  # noqa: F401  (fixtures)
    add_parity_marker,
    corpus,
    ner,
    reference_dir,
    reference_scores,
    served_dir,
    server,
)


def pytest_configure(config):
    add_parity_marker(config)


@pytest.fixture(scope="session")
def gliner_reference():
    return deberta_gliner_reference
