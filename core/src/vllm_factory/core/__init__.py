"""vLLM Factory core: the contracts every model package builds on.

Importing this package never imports vLLM; the vLLM-facing pieces live in
``adapter``, ``io_processor`` and ``compat`` and are imported on demand.
"""

from vllm_factory.core.pooler import FactoryPooler, PoolerRequest
from vllm_factory.core.version import __version__

__all__ = ["FactoryPooler", "PoolerRequest", "__version__"]
