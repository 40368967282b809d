"""Closed-loop HTTP load generator for throughput and latency measurements.

``concurrency`` clients each send one request, wait for its answer, then send the next, until
``warmup + requests`` requests have been sent in total. The first ``warmup`` requests are sent
the same way but are not measured; the clock for the measured part starts once every warm-up
request has finished.

The statistics are pure functions (:func:`percentile`, :func:`summarize`) so that they can be
tested on synthetic timings without a server.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import httpx

logger = logging.getLogger(__name__)

__all__ = ["Point", "closed_loop", "percentile", "summarize"]


@dataclass(frozen=True)
class Point:
    """One measured load point. Latencies are in milliseconds, ``None`` when nothing succeeded."""

    count: int
    """Requests that succeeded (HTTP 2xx) in the measured part."""
    errors: int
    """Requests that failed (non-2xx status or transport error) in the measured part."""
    wall_seconds: float
    req_per_s: float
    """Successful requests per second of wall time."""
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    mean_ms: float | None
    concurrency: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 <= q <= 100) with linear interpolation between order statistics.

    Same definition as NumPy's default (``method="linear"``): the value at rank
    ``q / 100 * (n - 1)`` of the sorted values, interpolated between its neighbours.
    """
    if not 0.0 <= q <= 100.0:  # also rejects NaN
        raise ValueError(f"percentile q must lie in [0, 100], got {q}")
    if len(values) == 0:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    rank = q / 100.0 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def summarize(
    latencies: Sequence[float], wall_seconds: float, errors: int, *, concurrency: int = 0
) -> Point:
    """Build a :class:`Point` from per-request latencies in seconds of successful requests."""
    if wall_seconds <= 0:
        raise ValueError(f"wall_seconds must be positive, got {wall_seconds}")
    if errors < 0:
        raise ValueError(f"errors must be >= 0, got {errors}")
    count = len(latencies)
    if count == 0:
        p50 = p95 = p99 = mean = None
    else:
        ms = [1000.0 * value for value in latencies]
        p50, p95, p99 = (percentile(ms, q) for q in (50, 95, 99))
        mean = sum(ms) / count
    return Point(
        count=count,
        errors=errors,
        wall_seconds=wall_seconds,
        req_per_s=count / wall_seconds,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        mean_ms=mean,
        concurrency=concurrency,
    )


async def _run_phase(
    client: httpx.AsyncClient,
    url: str,
    make_body: Callable[[int], dict],
    concurrency: int,
    indices: range,
) -> tuple[list[float], int, float, list[str]]:
    """Send the requests numbered ``indices`` with ``concurrency`` closed-loop workers."""
    latencies: list[float] = []
    failures: list[str] = []
    pending = iter(indices)

    async def worker() -> None:
        # ``next`` on a shared iterator is safe: workers only interleave at ``await``.
        for index in pending:
            body = make_body(index)
            started = time.perf_counter()
            try:
                response = await client.post(url, json=body)
            except httpx.HTTPError as exc:
                failures.append(f"request {index}: {type(exc).__name__}: {exc}")
                continue
            elapsed = time.perf_counter() - started
            if response.is_success:
                latencies.append(elapsed)
            else:
                failures.append(
                    f"request {index}: HTTP {response.status_code}: {response.text[:200]}"
                )

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(indices)) or 1)))
    wall = time.perf_counter() - started
    return latencies, len(failures), wall, failures


async def closed_loop(
    url: str,
    make_body: Callable[[int], dict],
    concurrency: int,
    requests: int,
    warmup: int,
    *,
    timeout: float = 600.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Point:
    """Measure ``requests`` POSTs to ``url`` at ``concurrency`` clients after ``warmup`` ones.

    ``make_body(i)`` builds the JSON body of request number ``i``; warm-up requests get
    ``0 .. warmup - 1`` and measured ones ``warmup .. warmup + requests - 1``. ``transport``
    replaces the network (e.g. ``httpx.MockTransport`` in tests).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if requests < 1:
        raise ValueError(f"requests must be >= 1, got {requests}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout), limits=limits, transport=transport
    ) as client:
        if warmup:
            _, warm_errors, warm_wall, failures = await _run_phase(
                client, url, make_body, concurrency, range(warmup)
            )
            logger.info("warm-up: %d requests in %.1f s, %d errors", warmup, warm_wall, warm_errors)
            for failure in failures[:3]:
                logger.warning("warm-up failure: %s", failure)
        latencies, errors, wall, failures = await _run_phase(
            client, url, make_body, concurrency, range(warmup, warmup + requests)
        )
    for failure in failures[:3]:
        logger.warning("failure: %s", failure)
    point = replace(summarize(latencies, wall, errors), concurrency=concurrency)
    logger.info(
        "concurrency %d: %d ok, %d errors, %.2f req/s, p50 %s ms, p95 %s ms",
        concurrency, point.count, point.errors, point.req_per_s,
        _fmt(point.p50_ms), _fmt(point.p95_ms),
    )  # fmt: skip
    return point


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"
