"""A single-process vLLM context (config + tensor-parallel group of one) for building the
encoder from vLLM's parallel layers outside a server."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def vllm_context(tmp_path_factory):
    """Yield a callable that runs ``fn()`` under a default ``VllmConfig``."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import parallel_state as ps

    config = VllmConfig()
    init_file = tmp_path_factory.mktemp("dist") / "init"
    with set_current_vllm_config(config):
        ps.init_distributed_environment(
            world_size=1,
            rank=0,
            distributed_init_method=f"file://{init_file}",
            local_rank=0,
            backend="gloo",
        )
        ps.ensure_model_parallel_initialized(1, 1)

    def run(fn):
        with set_current_vllm_config(config):
            return fn()

    yield run
    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()
