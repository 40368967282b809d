"""Timing a GPU call two ways, for the benchmark scripts of the kernels and heads."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def serial_and_returned(fn: Callable[[], object], repeats: int = 10) -> tuple[float, float]:
    """Median milliseconds of ``fn`` over ``repeats`` calls: serial (the GPU synchronised before
    and after: what the call costs end to end) and returned (until the call gives control back
    to Python: what the calling thread pays, e.g. an inference engine's one loop)."""
    import torch

    serial, returned = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        returned.append((time.perf_counter() - start) * 1e3)
        torch.cuda.synchronize()
        serial.append((time.perf_counter() - start) * 1e3)
    return statistics.median(serial), statistics.median(returned)
