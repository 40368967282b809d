"""A single-process vLLM context for unit tests that build encoders from vLLM's parallel
layers outside a server: a current ``VllmConfig`` and a tensor-parallel group of one.

A package's ``tests/conftest.py``::

    from vllm_factory.testing.vllm_context import finish_loading, vllm_context  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

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


def linears_asking_quantization(build: Callable[[Any], Any]) -> tuple[set[str], set[str]]:
    """Whether an encoder hands the engine's quantization config to each of its vLLM linear
    layers: ``build(vllm_config)`` builds it (under :func:`vllm_context`) with prefix
    ``"model"`` and an engine config whose quantization config records the prefix of every
    linear layer that asks it for a method (and leaves the layer unquantized, so this runs on
    any device). Returns the prefixes asked and ``"model." +`` the name of every vLLM linear
    layer in the built module; equal when every layer takes the config, under its own name."""
    import torch
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig
    from vllm.model_executor.layers.linear import LinearBase, UnquantizedLinearMethod
    from vllm.model_executor.layers.quantization.base_config import QuantizationConfig

    asked: set[str] = set()

    class Recording(QuantizationConfig):
        def get_name(self) -> Any:
            return "recording"

        def get_supported_act_dtypes(self) -> list[torch.dtype]:
            return [torch.float32, torch.bfloat16, torch.float16]

        @classmethod
        def get_min_capability(cls) -> int:
            return 0

        @staticmethod
        def get_config_filenames() -> list[str]:
            return []

        @classmethod
        def from_config(cls, config: dict[str, Any]) -> Recording:
            return cls()

        def get_quant_method(self, layer: Any, prefix: str) -> Any:
            if not isinstance(layer, LinearBase):
                return None
            asked.add(prefix)
            return UnquantizedLinearMethod()

    vllm_config = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
    vllm_config.quant_config = Recording()
    module = build(vllm_config)
    linears = {f"model.{n}" for n, m in module.named_modules() if isinstance(m, LinearBase)}
    return asked, linears


IN_GRAPH_BY_DEFAULT = {
    "cuda": True, "cpu": False, "no engine": False, "cuda, off": False, "cuda, on": True,
    "cuda, Triton disabled": False,
}  # fmt: skip
""":func:`in_graph_choices` of an encoder that attends in graph on CUDA unless turned off."""


def in_graph_choices(usable: Callable[[Any], bool], env: str, monkeypatch) -> dict[str, bool]:
    """What an encoder's in-graph attention choice (``usable(vllm_config)``) answers, Triton
    taken as available: on a CUDA engine, a CPU engine and outside an engine with ``env``
    unset; on CUDA with ``env`` 0, then 1; on CUDA with ``env=1`` and
    ``VLLM_FACTORY_DISABLE_TRITON=1``."""
    from types import SimpleNamespace

    def engine(device_type: str) -> Any:
        return SimpleNamespace(device_config=SimpleNamespace(device_type=device_type))

    monkeypatch.delenv(env, raising=False)
    monkeypatch.delenv("VLLM_FACTORY_DISABLE_TRITON", raising=False)
    monkeypatch.setattr("vllm_factory.kernels.rows_attention.triton_available", lambda: True)
    choices = {
        "cuda": usable(engine("cuda")), "cpu": usable(engine("cpu")), "no engine": usable(None),
    }  # fmt: skip
    for value, name in (("0", "cuda, off"), ("1", "cuda, on")):
        monkeypatch.setenv(env, value)
        choices[name] = usable(engine("cuda"))
    monkeypatch.setenv("VLLM_FACTORY_DISABLE_TRITON", "1")
    choices["cuda, Triton disabled"] = usable(engine("cuda"))
    return choices
