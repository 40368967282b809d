"""What the kernels' GPU benchmarks share: the start-up check, CUDA-event timing and the run's
metadata (each benchmark imports this file from its own folder)."""

from __future__ import annotations

import argparse
import platform
import statistics
from collections.abc import Callable
from typing import Any

import torch


def gpu_ready(name: str) -> bool:
    """True on a CUDA device with triton importable; otherwise says why ``name`` has nothing
    to compare (CI on CPU machines may call every benchmark) and returns False."""
    if not torch.cuda.is_available():
        print(f"{name}: no CUDA device available; nothing to benchmark.")
        return False
    from vllm_factory.kernels import triton_available

    if not triton_available():
        print(f"{name}: triton is not importable; nothing to compare.")
        return False
    return True


def add_timing_args(
    parser: argparse.ArgumentParser, warmup: int = 5, iters: int = 20, repeats: int = 5
) -> None:
    """``--warmup``, ``--iters`` and ``--repeats`` of :func:`time_ms`."""
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--iters", type=int, default=iters)
    parser.add_argument("--repeats", type=int, default=repeats)


def time_ms(fn: Callable[[], Any], warmup: int, iters: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean time of ``iters`` back-to-back calls, in ms."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / iters)
    return statistics.median(samples)


def run_meta(args: argparse.Namespace, shapes: dict[str, Any], **more: Any) -> dict[str, Any]:
    """The device, the versions, the shapes and the timing settings of a run, for its JSON."""
    import triton
    from vllm_factory.kernels import __version__

    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "vllm_factory_kernels": __version__,
        "shapes": shapes,
        "timing": {"warmup": args.warmup, "iters": args.iters, "repeats": args.repeats},
        **more,
    }
