"""The ColBERT family's session fixtures: the package's tiny PyLate checkpoint and reference
outputs, one real vLLM server with the plugin, and ``encode`` through ``POST /pooling``.
A package's conftest declares ``colbert_package = package_fixture(__file__)`` (see
:mod:`vllm_factory.testing.fixtures`)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from vllm_factory.testing.colbert.references import ColBERTReference
from vllm_factory.testing.fixtures import (
    fixture_names,
    package_dir,
    pytest_configure,
    reference_fixtures,
    session_value,
)
from vllm_factory.testing.refenv import package_reference


class ColBERTPackage(NamedTuple):
    reference: ColBERTReference
    """The package's reference (``reference_dir()``: checkpoint + ``ref-*.npz``; ``CORPUS``:
    queries and documents; ``libraries``: whose outputs the parity test compares)."""
    io_processor: str
    architecture: str

    @property
    def name(self) -> str:
        return self.io_processor.removesuffix("_io")

    @property
    def libraries(self) -> tuple[str, ...]:
        return self.reference.libraries


def load_package(package_dir: Path) -> ColBERTPackage:
    """The ColBERT package in ``package_dir``: its reference and, from its package module,
    its IOProcessor and architecture names."""
    module = importlib.import_module(f"vllm_factory.models.{package_dir.name}")
    return ColBERTPackage(package_reference(package_dir), module.IO_PROCESSOR, module.ARCHITECTURE)


def package_fixture(conftest_file: str | Path) -> Callable:
    """The session fixture ``colbert_package`` of the package whose ``tests/conftest.py`` is
    ``conftest_file``."""
    return session_value("colbert_package", load_package(package_dir(conftest_file)))


reference_dir, checkpoint = reference_fixtures("colbert_package")


@pytest.fixture(scope="session")
def corpus(colbert_package: ColBERTPackage) -> dict[str, list[str]]:
    data = json.loads(colbert_package.reference.CORPUS.read_text(encoding="utf-8"))
    return {
        "queries": [item["text"] for item in data["queries"]],
        "documents": [item["text"] for item in data["documents"]],
    }


def load_vectors(path: Path) -> dict[str, list[np.ndarray]]:
    """A reference file -> ``{"queries": [...], "documents": [...]}`` of ``[tokens, dim]``."""
    data = np.load(path)
    out = {}
    for part, key in (("query", "queries"), ("document", "documents")):
        offsets, vectors = data[f"{part}_offsets"], data[f"{part}_vectors"]
        out[key] = [vectors[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
    return out


@pytest.fixture(scope="session")
def reference(reference_dir: Path):
    """``reference(library)`` -> ``{"queries": [...], "documents": [...]}`` of ``[tokens, dim]``."""
    return lambda library: load_vectors(reference_dir / f"ref-{library}.npz")


@pytest.fixture(scope="session")
def server(checkpoint: Path, colbert_package: ColBERTPackage):
    """One real vLLM OpenAI server with the plugin for the whole test session."""
    from vllm_factory.testing.server import VllmServer  # httpx: integration tests only

    with VllmServer(
        checkpoint,
        io_processor_plugin=colbert_package.io_processor,
        hf_overrides={"architectures": [colbert_package.architecture]},
    ) as running:
        print(f"\nvLLM server healthy after {running.startup_seconds:.1f} s")
        yield running


def encoder(server):
    """``encode(texts, is_query)`` through POST /pooling -> list of ``[tokens, dim]`` arrays."""

    def run(texts: list[str] | str, is_query: bool) -> list[np.ndarray]:
        """One text (a string) is answered with its vectors; a list with one item each."""
        response = server.pooling({"text": texts, "is_query": is_query})
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        if isinstance(texts, str):
            return [np.asarray(data, dtype=np.float32)]
        for item in data:
            assert item["num_tokens"] == len(item["embeddings"])
        return [np.asarray(item["embeddings"], dtype=np.float32) for item in data]

    return run


@pytest.fixture(scope="session")
def encode(server):
    return encoder(server)


@pytest.fixture(scope="module")
def st_layout_server(reference_dir: Path, colbert_package: ColBERTPackage):
    """A server on the same backbone saved in sentence-transformers' own layout
    (``checkpoint-st``), served as a user would: ``--config-format colbert`` and nothing else
    (no --io-processor-plugin, no --hf-overrides)."""
    from vllm_factory.testing.server import VllmServer

    with VllmServer(
        reference_dir / "checkpoint-st", extra_args=["--config-format", "colbert"]
    ) as running:
        yield running


# What the package conftest's star import brings in: the hook and every fixture above.
__all__ = ["pytest_configure", *fixture_names(globals())]  # noqa: PLE0604
