"""The ColPali family's session fixtures: the package's tiny checkpoint, test images and
reference outputs (colpali-engine, built in its own venv), one real vLLM server with the plugin
served as a user would (``--config-format colpali``), and helpers for ``POST /pooling``.
A package's conftest declares ``colpali_package = package_fixture(__file__)``."""

from __future__ import annotations

import base64
import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from vllm_factory.heads.colbert.vectors import decode_response
from vllm_factory.testing.colpali.references import ColPaliReference
from vllm_factory.testing.fixtures import (
    fixture_names,
    package_dir,
    pytest_configure,
    reference_fixtures,
    session_value,
)
from vllm_factory.testing.refenv import package_reference

# The server's image limits in these suites (small, so the limit tests stay cheap).
MAX_PIXELS, MAX_BYTES = 4_000_000, 4 * 1024 * 1024


class ColPaliPackage(NamedTuple):
    reference: ColPaliReference
    io_processor: str
    architecture: str

    @property
    def name(self) -> str:
        return self.io_processor.removesuffix("_io")


def load_package(package: Path) -> ColPaliPackage:
    module = importlib.import_module(f"vllm_factory.models.{package.name}")
    return ColPaliPackage(package_reference(package), module.IO_PROCESSOR, module.ARCHITECTURE)


def package_fixture(conftest_file: str | Path) -> Callable:
    """The session fixture ``colpali_package`` of the package whose ``tests/conftest.py`` is
    ``conftest_file``."""
    return session_value("colpali_package", load_package(package_dir(conftest_file)))


class Corpus(NamedTuple):
    queries: list[str]
    documents: list[str]
    images: list[Path]  # the test images, in corpus order


reference_dir, checkpoint = reference_fixtures("colpali_package")


@pytest.fixture(scope="session")
def corpus(colpali_package: ColPaliPackage, reference_dir: Path) -> Corpus:
    data = json.loads(colpali_package.reference.CORPUS.read_text(encoding="utf-8"))
    manifest = json.loads((reference_dir / "images" / "images.json").read_text())
    entries = manifest["images"] if isinstance(manifest, dict) else manifest
    return Corpus(
        queries=[item["text"] for item in data["queries"]],
        documents=[item["text"] for item in data["documents"]],
        images=[reference_dir / "images" / entry["file"] for entry in entries],
    )


def load_reference(path: Path) -> dict[str, list[np.ndarray]]:
    """A reference file -> ``{"query": [...], "text": [...], "image": [...]}`` of
    ``[tokens, dim]`` vectors, in corpus order."""
    data = np.load(path)
    out: dict[str, list[np.ndarray]] = {}
    for part in ("query", "text", "image"):
        count = sum(
            1 for key in data.files if key.startswith(f"{part}_") and key[len(part) + 1 :].isdigit()
        )
        out[part] = [data[f"{part}_{i}"] for i in range(count)]
    return out


@pytest.fixture(scope="session")
def reference(reference_dir: Path) -> Callable[[str], dict[str, list[np.ndarray]]]:
    """``reference(dtype)``: colpali-engine's vectors, fp32 (``"float32"``) or its own bf16 run."""
    files = {"float32": "ref-colpali.npz", "bfloat16": "ref-colpali-bf16.npz"}
    return lambda dtype="float32": load_reference(reference_dir / files[dtype])


def image_b64(path: Path) -> str:
    return base64.b64encode(Path(path).read_bytes()).decode("ascii")


@pytest.fixture(scope="session")
def server(checkpoint: Path, reference_dir: Path):
    """One real vLLM OpenAI server with the plugin for the whole test session, started as the
    README says (``--config-format colpali``), with local images allowed from the test images'
    folder, image URLs from this machine's own test server (127.0.0.1, named in
    ``--allowed-media-domains``: a private address is refused unless the operator names it)
    and small image limits."""
    from vllm_factory.testing.server import VllmServer  # httpx: integration tests only

    with VllmServer(
        checkpoint,
        extra_args=[
            "--config-format", "colpali",
            "--allowed-local-media-path", str(reference_dir / "images"),
            "--allowed-media-domains", "127.0.0.1",
        ],
        max_model_len=2048,
        env={
            "VLLM_FACTORY_IMAGE_MAX_PIXELS": str(MAX_PIXELS),
            "VLLM_FACTORY_IMAGE_MAX_BYTES": str(MAX_BYTES),
            "VLLM_IMAGE_FETCH_TIMEOUT": "3",
            # One attempt: an unreachable URL fails at once (vLLM retries with backoff).
            "VLLM_MEDIA_FETCH_MAX_RETRIES": "1",
        },
    ) as running:  # fmt: skip
        print(f"\nvLLM server healthy after {running.startup_seconds:.1f} s")
        yield running


def vectors_of(response) -> list[np.ndarray]:
    """The token vectors of a 200 encoding response, as float32 arrays, one per input (any
    answer form: one input's vectors or item, or one item per input)."""
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    items = [data] if isinstance(data, dict) or (data and isinstance(data[0], list)) else data
    out = decode_response(data)
    for item, matrix in zip(items, out):
        if isinstance(item, dict):
            assert len(matrix) == item["num_tokens"]
    return out


@pytest.fixture(scope="session")
def encode(server):
    """``encode(data)`` -> the token vectors of each input of an encoding request."""
    return lambda data: vectors_of(server.pooling(data))


# What the package conftest's star import brings in: the hook and every fixture above.
__all__ = ["pytest_configure", *fixture_names(globals())]  # noqa: PLE0604
