"""Three real vLLM servers (a GLiNER, a ColBERT, an embedder: the tiny checkpoints of their
packages' own tests, served as those tests serve them) and the router of ``router/`` in front
of them, for the whole session."""

from __future__ import annotations

import importlib.util
import os
import secrets
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
from vllm_factory.testing.refenv import ReferenceEnv
from vllm_factory.testing.server import SubprocessServer, VllmServer

DEPLOY = Path(__file__).resolve().parents[1]
MODELS = DEPLOY.parent / "models"
ROUTER = DEPLOY / "router"


class Backend(NamedTuple):
    name: str  # --served-model-name, the router's model_name
    server: VllmServer


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gliner_server(tmp: Path, server: type[VllmServer] = VllmServer, **kwargs) -> VllmServer:
    """deberta_gliner's tiny checkpoint through vllm-factory-prep: its config.json names the
    architecture and the IOProcessor (no plugin flags), as the package's tests serve it.
    ``server``: the class that serves it; ``kwargs``: more of its arguments."""
    from vllm_factory.heads.gliner.prep import prepare
    from vllm_factory.testing.gliner.references import GLiNERReference

    reference = GLiNERReference(MODELS / "deberta_gliner" / "reference" / "build_checkpoint.py")
    served = prepare(reference.reference_dir() / "checkpoint", tmp / "gliner")
    extra = ["--served-model-name", "gliner", *kwargs.pop("extra_args", ())]
    return server(served, extra_args=extra, **kwargs)


def colbert_server(server: type[VllmServer] = VllmServer, **kwargs) -> VllmServer:
    """moderncolbert's tiny PyLate checkpoint with its plugin (the ColBERT family's fixture);
    ``server`` and ``kwargs`` as for :func:`gliner_server`."""
    from vllm_factory.testing.colbert.fixtures import load_package

    package = load_package(MODELS / "moderncolbert")
    return server(
        package.reference.reference_dir() / "checkpoint",
        io_processor_plugin=package.io_processor,
        hf_overrides={"architectures": [package.architecture]},
        extra_args=["--served-model-name", "colbert", *kwargs.pop("extra_args", ())],
        **kwargs,
    )


def embedder_server() -> VllmServer:
    """embeddinggemma's tiny checkpoint with its plugin (its package's fixture)."""
    from vllm_factory.models import embeddinggemma

    reference = _module(MODELS / "embeddinggemma" / "reference" / "embeddinggemma_reference.py")
    return VllmServer(
        reference.reference_dir() / "checkpoint",
        io_processor_plugin=embeddinggemma.IO_PROCESSOR,
        hf_overrides={"architectures": [embeddinggemma.ARCHITECTURE]},
        extra_args=["--served-model-name", "embedder"],
    )


class RouterServer(SubprocessServer):
    """LiteLLM's proxy (its own venv, ``router/requirements.txt``) on ``config``; ``urls``:
    the environment variables the config reads its backends from."""

    log_prefix = "router-"
    startup_timeout = 180.0

    def __init__(self, litellm: Path, config: Path, urls: dict[str, str]) -> None:
        super().__init__()
        self.model = "router"
        self.label = "litellm"
        self.key = "sk-" + secrets.token_hex(16)
        port = self.lease_port()
        self.url = f"http://127.0.0.1:{port}"
        self.args = [str(litellm), "--config", str(config), "--host", "127.0.0.1",
                     "--port", str(port)]  # fmt: skip
        self.env = {
            **os.environ, **urls,
            "LITELLM_MASTER_KEY": self.key,
            # the packaged model cost map: no fetch from the network at start-up
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }  # fmt: skip

    def healthy(self) -> bool:
        return httpx.get(f"{self.url}/health/readiness", timeout=2).status_code == 200

    def post(self, path: str, payload: dict, timeout: float = 120.0) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.post(f"{self.url}{path}", json=payload, headers=headers, timeout=timeout)


def router_env() -> ReferenceEnv:
    return ReferenceEnv("litellm-router", [["-r", str(ROUTER / "requirements.txt")]])


@pytest.fixture(scope="session")
def backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Backend]]:
    """The three servers, started side by side (each start waits on its own engine)."""
    servers = {
        "gliner": gliner_server(tmp_path_factory.mktemp("deploy")),
        "colbert": colbert_server(),
        "embedder": embedder_server(),
    }
    with ExitStack() as stack:
        for server in servers.values():
            stack.callback(server.stop)
        with ThreadPoolExecutor(len(servers)) as pool:
            for started in [pool.submit(server.start) for server in servers.values()]:
                started.result()
        for name, server in servers.items():
            print(f"\n{name}: vLLM server healthy after {server.startup_seconds:.1f} s")
        yield {name: Backend(name, server) for name, server in servers.items()}


@pytest.fixture(scope="session")
def router(backends: dict[str, Backend]) -> Iterator[RouterServer]:
    """The router on ``router/litellm.yaml`` as committed, its URLs pointing at the servers."""
    env = router_env().ensure()
    litellm = env.python.parent / "litellm"
    urls = {f"{name.upper()}_URL": backend.server.url for name, backend in backends.items()}
    with RouterServer(litellm, ROUTER / "litellm.yaml", urls) as running:
        print(f"router healthy after {running.startup_seconds:.1f} s")
        yield running


if sys.platform != "linux":  # the servers' process handling reads /proc
    pytest.skip("Linux only", allow_module_level=True)
