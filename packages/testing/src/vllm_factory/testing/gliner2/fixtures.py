"""The GLiNER2 family's session fixtures: the library's reference outputs on the tiny
checkpoint, and one real vLLM server serving the library's own directory through
``--config-format gliner2``. A package's conftest declares ``gliner2_reference =
reference_fixture(__file__)``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.testing.fixtures import (
    fixture_names,
    package_dir,
    pytest_configure,
    session_value,
)
from vllm_factory.testing.gliner2.references import GLiNER2Reference

CONFIG_FORMAT = ["--config-format", "gliner2"]


def reference_fixture(conftest_file: str | Path) -> Callable:
    """The session fixture ``gliner2_reference`` of the package whose ``tests/conftest.py`` is
    ``conftest_file``."""
    reference = GLiNER2Reference(package_dir(conftest_file) / "reference" / "build_checkpoint.py")
    return session_value("gliner2_reference", reference)


@pytest.fixture(scope="session")
def reference_dir(gliner2_reference: GLiNER2Reference) -> Path:
    """``checkpoint/`` (the library's layout), ``ref-results.json``, ``ref-scores.npz``."""
    return gliner2_reference.reference_dir()


@pytest.fixture(scope="session")
def cases(gliner2_reference: GLiNER2Reference) -> list[dict]:
    return json.loads(Path(gliner2_reference.CASES).read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def reference_results(reference_dir: Path) -> dict:
    return json.loads((reference_dir / "ref-results.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def reference_scores(reference_dir: Path) -> dict[str, np.ndarray]:
    data = np.load(reference_dir / "ref-scores.npz")
    return {key: data[key] for key in data.files}


@pytest.fixture(scope="session")
def server(reference_dir: Path):
    """One real vLLM server on the library's own directory (no prep step)."""
    from vllm_factory.testing.server import VllmServer  # httpx: integration tests only

    with VllmServer(reference_dir / "checkpoint", extra_args=CONFIG_FORMAT) as running:
        print(f"\nvLLM server healthy after {running.startup_seconds:.1f} s")
        yield running


@pytest.fixture(scope="session")
def extract(server):
    """``extract(data)`` -> the response ``data`` (asserts HTTP 200)."""

    def run(data: dict):
        response = server.pooling(data)
        assert response.status_code == 200, response.text
        return response.json()["data"]

    return run


# What the package conftest's star import brings in: the hook and every fixture above.
__all__ = ["pytest_configure", *fixture_names(globals())]  # noqa: PLE0604


def library_layout(root: Path, config: dict, encoder_config: dict) -> Path:
    """A GLiNER2 directory laid out as ``GLiNER2.save_pretrained`` lays it out (``config.json``,
    ``encoder_config/config.json``, weights and tokenizer files as placeholders), for tests of
    the config parsers and ``vllm-factory-prep``, which read only the layout and configs."""
    (root / "encoder_config").mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    (root / "encoder_config" / "config.json").write_text(json.dumps(encoder_config))
    (root / "model.safetensors").write_bytes(b"weights")
    (root / "tokenizer.json").write_text("{}")
    (root / "tokenizer_config.json").write_text("{}")
    return root


def library_fixture(config: dict, encoder_config: dict) -> Callable:
    """A test module's fixture ``library_dir``: :func:`library_layout` of ``config`` and
    ``encoder_config`` under the test's ``tmp_path``."""

    @pytest.fixture
    def library_dir(tmp_path: Path) -> Path:
        return library_layout(tmp_path / "gliner2", config, encoder_config)

    return library_dir


def prepared_config(library_dir: Path, out: Path) -> dict:
    """``vllm-factory-prep --model library_dir --output out`` (asserted to succeed, no other
    flag): the served ``config.json`` it wrote."""
    from vllm_factory.heads.gliner.prep import main

    assert main(["--model", str(library_dir), "--output", str(out)]) == 0
    return json.loads((out / "config.json").read_text())
