"""The per-step cache of packed-batch layouts that split-point ops share.

A split-point op (an attention that reads the sequence layout from the positions on the host)
runs once per layer, but the layout is the same for every layer of a model step. The step is
the engine's (vLLM's forward context), which this wheel never imports: a backbone run by an
engine installs a cache that lives for one step with :func:`cache_layouts_per_step`. Without
one (an op called by hand, as in tests) each call builds its own layout. Pure torch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import torch

_T = TypeVar("_T")
# ``(key, positions, build) -> build()``, or the value built earlier in this model step.
StepCache = Callable[[Hashable, torch.Tensor, Callable[[], Any]], Any]


def _build_every_time(key: Hashable, positions: torch.Tensor, build: Callable[[], _T]) -> _T:
    return build()


_step_cache: StepCache = _build_every_time


def cache_layouts_per_step(cache: StepCache | None) -> StepCache:
    """Keep the layouts the ops read from the positions in ``cache`` (None: build each time);
    the cache it replaces (to put back)."""
    global _step_cache
    previous, _step_cache = _step_cache, (_build_every_time if cache is None else cache)
    return previous


def step_cached(key: Hashable, positions: torch.Tensor, build: Callable[[], _T]) -> _T:
    """``build()``, or what it gave earlier in this model step for ``key`` and ``positions``."""
    return _step_cache(key, positions, build)
