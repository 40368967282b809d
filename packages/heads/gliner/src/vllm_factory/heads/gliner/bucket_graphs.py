"""One CUDA graph per bucket of shapes, captured at a bucket's first step and replayed after:
the one way the GLiNER head runs a part of its step from CUDA graphs (the word BiLSTM,
:mod:`.word_lstm`, and span scoring, :mod:`.span_graphs`).

A bucket owns static input buffers (the caller copies each step's tensors into their leading
rows) and the output its body wrote during capture. Before a capture the body runs once on a
side stream, so that cuDNN, cuBLAS and Triton make their choices (and compile) outside it; all
buckets share one memory pool; ``thread_local`` capture, so that what other threads of the
engine do meanwhile neither breaks a capture nor is broken by it. A capture that fails is said
once, and the owner runs eagerly from then on: nothing here raises into the engine. On the CPU
(tests) a bucket holds the same buffers and no graph: the caller runs the body eagerly on them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)


# What a bucket's graph holds: its static inputs -> its output.
Body = Callable[[list[torch.Tensor]], torch.Tensor]
# A new bucket: its zeroed static inputs, its body, and its shapes in words (for the log).
Recipe = tuple[list[torch.Tensor], Body, str]


@dataclass
class Bucket:
    inputs: list[torch.Tensor]
    out: torch.Tensor
    graph: torch.cuda.CUDAGraph | None  # None off CUDA: run the body on ``inputs`` instead


class BucketGraphs:
    """The buckets of one part of the head, by key (shapes rounded up, dtype, device and the
    settings the body depends on). ``name`` and ``fallback`` word the log lines; ``limit``: the
    most buckets kept (past it :meth:`bucket` answers ``None`` and the caller runs eagerly)."""

    def __init__(self, name: str, fallback: str, limit: int | None = None) -> None:
        self.name = name
        self.fallback = fallback
        self.limit = limit
        self.buckets: dict[Hashable, Bucket] = {}
        self.failed = False
        self._pool: object = None

    def bucket(
        self, key: Hashable, device: torch.device, make: Callable[[], Recipe]
    ) -> Bucket | None:
        """``key``'s bucket, captured now if it is new (``make()`` gives its zeroed static
        buffers, the body the graph holds and the shapes' name for the log); ``None`` after a
        failed capture or past the limit."""
        found = self.buckets.get(key)
        if found is not None or self.failed:
            return found
        if self.limit is not None and len(self.buckets) >= self.limit:
            return None
        try:
            found = self.buckets[key] = self._capture(*make(), device)
        except Exception:  # never raise in the engine: the owner runs eagerly from now on
            logger.warning("%s: CUDA graph capture failed; %s", self.name, self.fallback,
                           exc_info=True)  # fmt: skip
            self.failed = True
            return None
        return found

    def _capture(self, inputs: list[torch.Tensor], body: Body, what: str, device: torch.device
                 ) -> Bucket:  # fmt: skip
        if device.type != "cuda":
            return Bucket(inputs, body(inputs), None)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up: library choices and compiles outside capture
            body(inputs)
        torch.cuda.current_stream(device).wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            out = body(inputs)
        logger.info("%s: CUDA graph captured for %s", self.name, what)
        return Bucket(inputs, out, graph)
