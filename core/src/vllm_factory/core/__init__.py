"""vLLM Factory core: the contracts every model package builds on.

Importing this package imports neither vLLM nor torch: ``FactoryPooler`` and
``PoolerRequest`` load on first use, so stdlib-only tools (the reference-venv builder of
``vllm_factory.testing.refenv``) run under any Python. The vLLM-facing pieces live in ``adapter``,
``io_processor`` and ``compat`` and are imported on demand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm_factory.core.version import __version__

if TYPE_CHECKING:
    from vllm_factory.core.pooler import FactoryPooler, PoolerRequest

__all__ = ["FactoryPooler", "PoolerRequest", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("FactoryPooler", "PoolerRequest"):
        from vllm_factory.core import pooler

        return getattr(pooler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
