"""Choose between the Triton kernel and the PyTorch fallback for one call.

Rules, in order:

* ``backend="torch"`` always uses the fallback.
* ``backend="triton"`` always uses Triton, and fails loudly if it cannot run (tests and
  benchmarks rely on that, so a silent fallback can never pass for a kernel result).
* ``backend="auto"`` (the default) uses Triton when every tensor is on CUDA, Triton imports,
  ``VLLM_FACTORY_DISABLE_TRITON`` is not set to a true value and no tensor needs autograd (the
  kernels are inference-only, they have no backward); otherwise the fallback.
* Under ``torch.compile`` (vLLM's compiled encoders) ``"auto"`` is the fallback: Inductor fuses
  it with its neighbours, which matches or beats the separate Triton launches (the kernel
  benchmarks in ``docs/benchmarks/<gpu>/``), and the traced graph stays free of Python-side
  logging.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from typing import Literal

import torch
from vllm_factory.core import envs

logger = logging.getLogger(__name__)

Backend = Literal["auto", "triton", "torch"]
BACKENDS: tuple[str, ...] = ("auto", "triton", "torch")
DISABLE_ENV = envs.DISABLE_TRITON.name

_TRUE = {"1", "true", "yes", "on"}


def triton_disabled() -> bool:
    """True when the user forced the PyTorch fallbacks through the environment."""
    # Read on every call (cheap) so that tests and long-lived processes can flip it.
    return envs.get(envs.DISABLE_TRITON)


def interpreter_enabled() -> bool:
    """True when Triton's CPU interpreter is requested (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUE


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    """True when ``triton`` is installed and imports; the answer is cached per process."""
    if importlib.util.find_spec("triton") is None:
        return False
    try:
        import triton.language  # noqa: F401
    except (ImportError, RuntimeError, AttributeError, OSError) as exc:
        # A broken install (e.g. mismatched torch/triton) must not break the fallbacks.
        logger.warning("triton is installed but failed to import (%s); using PyTorch", exc)
        return False
    return True


def select_backend(backend: str, *tensors: torch.Tensor, kernel: str | None = None) -> str:
    """Return ``"triton"`` or ``"torch"`` for a call on ``tensors``; with ``kernel`` (the public
    function's name) the choice is also :func:`announce`-d."""
    choice = _choose(backend, *tensors)
    if kernel is not None:
        announce(kernel, choice)
    return choice


_ANNOUNCED: set[tuple[str, str]] = set()


def announce(kernel: str, choice: str) -> None:
    """Log the first call of each (kernel, backend) at INFO, so that a server's log shows
    which kernels the served model really ran. Silent while ``torch.compile`` traces (dynamo
    cannot put logging into a graph)."""
    if torch.compiler.is_compiling():
        return
    if (kernel, choice) not in _ANNOUNCED:
        _ANNOUNCED.add((kernel, choice))
        where = "Triton" if choice == "triton" else "the PyTorch fallback"
        logger.info("vllm-factory kernel %s runs on %s", kernel, where)


def _choose(backend: str, *tensors: torch.Tensor) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "torch":
        return "torch"
    on_cuda = all(t.is_cuda for t in tensors)
    if backend == "triton":
        if not triton_available():
            raise RuntimeError("backend='triton' requested but triton is not importable")
        if not on_cuda and not interpreter_enabled():
            raise RuntimeError(
                "backend='triton' needs CUDA tensors (or TRITON_INTERPRET=1 for CPU tensors)"
            )
        return "triton"
    if torch.compiler.is_compiling() or triton_disabled() or not on_cuda or not triton_available():
        return "torch"
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return "torch"
    return "triton"


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (Triton block sizes must be powers of two)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()
