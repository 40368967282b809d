"""A single-process vLLM context for unit tests that build encoders from vLLM's parallel
layers outside a server: a current ``VllmConfig`` and a tensor-parallel group of one.

A package's ``tests/conftest.py``::

    from vllm_factory.testing.vllm_context import finish_loading, vllm_context  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from vllm_factory.testing.server import free_port


@pytest.fixture(scope="session")
def vllm_context() -> Iterator[None]:
    """The session's vLLM context (gloo, world size 1); the process group is made once, even
    where several packages' conftests bring this fixture into one pytest run."""
    import torch.distributed
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment

    with set_current_vllm_config(VllmConfig()):
        if not torch.distributed.is_initialized():
            init_distributed_environment(
                world_size=1, rank=0, local_rank=0,
                distributed_init_method=f"tcp://127.0.0.1:{free_port()}", backend="gloo",
            )  # fmt: skip
        ensure_model_parallel_initialized(1, 1)
        yield


def finish_loading(model) -> None:
    """What vLLM's loader does after load_weights (e.g. vLLM CPU's linear dispatch setup)."""
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(module)
