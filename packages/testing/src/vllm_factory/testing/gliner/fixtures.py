"""The GLiNER family's session fixtures: gliner's reference outputs, the checkpoint prepared
for vLLM, and one real vLLM server. A package's conftest declares ``gliner_reference =
reference_fixture(__file__)`` (see :mod:`vllm_factory.testing.fixtures`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.heads.gliner.prep import prepare
from vllm_factory.testing.fixtures import (
    fixture_names,
    package_dir,
    pytest_configure,
    session_value,
)
from vllm_factory.testing.gliner.references import GLiNERReference


def reference_fixture(conftest_file: str | Path, variant: str = "") -> Callable:
    """The session fixture ``gliner_reference`` of the package whose ``tests/conftest.py`` is
    ``conftest_file``: the family kit on its ``reference/build_checkpoint.py``. A conftest
    one folder deeper (``tests/<suite>/conftest.py``) serves a checkpoint ``variant`` of the
    same builder (:attr:`GLiNERReference.VARIANTS`) to the tests of its folder."""
    package = package_dir(conftest_file)
    if not (package / "reference").is_dir():
        package = package.parent
    reference = GLiNERReference(package / "reference" / "build_checkpoint.py", variant)
    return session_value("gliner_reference", reference)


@pytest.fixture(scope="session")
def reference_dir(gliner_reference: GLiNERReference) -> Path:
    """``checkpoint/`` (gliner's layout), ``ref-scores.npz``, ``ref-entities.json``."""
    return gliner_reference.reference_dir()


@pytest.fixture(scope="session")
def corpus(gliner_reference: GLiNERReference) -> dict:
    return json.loads(gliner_reference.CORPUS.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def served_dir(reference_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gliner checkpoint run through vllm-factory-prep (architecture and IOProcessor
    come from the installed model package that serves its encoder type); a directory of this
    session's own, since sessions may share the reference directory."""
    return prepare(reference_dir / "checkpoint", tmp_path_factory.mktemp("gliner") / "served")


@pytest.fixture(scope="session")
def server(served_dir: Path):
    """One real vLLM server for the session; no --io-processor-plugin, no --hf-overrides:
    the prepared config.json names both."""
    from vllm_factory.testing.server import VllmServer  # httpx: integration tests only

    with VllmServer(served_dir) as running:
        print(f"\nvLLM server healthy after {running.startup_seconds:.1f} s")
        yield running


@pytest.fixture(scope="session")
def ner(server):
    """``ner(data)`` -> the response ``data`` list (asserts HTTP 200); ``ner(data, timeout=s)``
    waits longer than the server fixture's default."""

    def run(data: dict, timeout: float | None = None) -> list:
        response = server.pooling(data) if timeout is None else server.pooling(data, timeout)
        assert response.status_code == 200, response.text
        return response.json()["data"]

    return run


@pytest.fixture(scope="session")
def reference_scores(reference_dir: Path) -> dict[str, np.ndarray]:
    data = np.load(reference_dir / "ref-scores.npz")
    return {key: data[key] for key in data.files}


# What the package conftest's star import brings in: the hook and every fixture above.
__all__ = ["pytest_configure", *fixture_names(globals())]  # noqa: PLE0604
