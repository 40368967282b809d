"""A single-process vLLM context: the parallel layers need a TP group and a current config."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_context() -> Iterator[None]:
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0,
            distributed_init_method=f"tcp://127.0.0.1:{_free_port()}", backend="gloo",
        )  # fmt: skip
        initialize_model_parallel(1, 1)
        yield


def finish_loading(model) -> None:
    """What vLLM's loader does after load_weights (e.g. vLLM CPU's linear dispatch setup)."""
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(module)
