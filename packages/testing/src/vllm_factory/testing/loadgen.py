"""HTTP load generator for throughput and latency measurements (asyncio + aiohttp).

Closed loop (:func:`closed_loop`): ``concurrency`` clients each send one request, wait for its
answer, then send the next, until ``warmup + requests`` requests have been sent in total. The
first ``warmup`` requests are sent the same way but are not measured; the clock for the
measured part starts once every warm-up request has finished. With ``min_seconds`` the clients
go on sending (the bodies numbered on) until that many seconds of the measured part have
passed as well: at a thousand requests a second a fixed count is over in a fraction of a
second, too short for the machine's jitter to average out or for a sampling profiler to see.

Open loop (:func:`open_loop`): requests are sent at the instants of a seeded Poisson process
of a given rate (:func:`poisson_schedule`), whether or not earlier ones have been answered.
A request's latency runs from its *scheduled* instant, so a server that falls behind shows
its queueing delay (no coordinated omission).

:func:`closed_loop_processes` spreads a closed loop's clients over several forked processes,
for rates one Python process cannot send and read.

Both take a :class:`Workload` (what to send); with its ``tokens_of(i)``, the number of
model input tokens of request ``i``, the point also reports tokens per second.

Every point also reports the load generator's own CPU time (``client_cpu_share``: CPU seconds
of this process over wall seconds). Near 1.0 the client, not the server, sets the pace. That
is why the client is aiohttp: measured on the 2-core CI machine against a canned 350 KB JSON
answer (one 512 x 128 ColBERT document in base64), httpx 0.28 spent 2.9 / 16 / 22 ms of CPU
per request at 1 / 64 / 256 clients (a ceiling of about 45-60 req/s, below what the H100
servers answer), aiohttp 3.14 1.4 / 1.0 / 1.0 ms.

The statistics are pure functions (:func:`percentile`, :func:`summarize`) so that they can be
tested on synthetic timings without a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import aiohttp

logger = logging.getLogger(__name__)

__all__ = [
    "Point",
    "Workload",
    "closed_loop",
    "closed_loop_processes",
    "open_loop",
    "percentile",
    "poisson_schedule",
    "summarize",
]


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
    tokens: int | None = None
    """Model input tokens of the successful measured requests (``None``: not counted)."""
    tokens_per_s: float | None = None
    mode: str = "closed"
    """``closed`` (fixed number of clients) or ``open`` (Poisson arrivals)."""
    offered_rate: float | None = None
    """Open loop only: the Poisson arrival rate in requests per second."""
    client_cpu_share: float | None = None
    """CPU seconds the load generator's process spent over the point's wall seconds (of its
    busiest process where :func:`closed_loop_processes` used several)."""

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
    latencies: Sequence[float],
    wall_seconds: float,
    errors: int,
    *,
    concurrency: int = 0,
    tokens: int | None = None,
) -> Point:
    """Build a :class:`Point` from per-request latencies in seconds of successful requests.

    ``tokens``: model input tokens of those successful requests, for ``tokens_per_s``.
    """
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
        tokens=tokens,
        tokens_per_s=None if tokens is None else tokens / wall_seconds,
    )


def poisson_schedule(rate: float, count: int, seed: int) -> list[float]:
    """Send instants (seconds from 0) of ``count`` arrivals of a Poisson process of ``rate``/s.

    Inter-arrival gaps are i.i.d. exponential with mean ``1 / rate``, drawn from a
    ``random.Random(seed)``; the first arrival is at 0 so that a run starts at once.
    """
    if not rate > 0 or math.isinf(rate):
        raise ValueError(f"rate must be a positive finite number, got {rate}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    rng = random.Random(seed)
    instants: list[float] = []
    now = 0.0
    for index in range(count):
        if index:
            now += rng.expovariate(rate)
        instants.append(now)
    return instants


@dataclass(frozen=True)
class Workload:
    """What one load point sends: ``warmup`` unmeasured POSTs to ``url`` (bodies
    ``make_body(0 .. warmup - 1)``), then ``requests`` measured ones (``make_body(warmup ..
    warmup + requests - 1)``), in a closed loop more until ``min_seconds`` of the measured part
    have passed. ``tokens_of(i)``: model input tokens of request ``i`` (for tokens per
    second)."""

    url: str
    make_body: Callable[[int], dict]
    requests: int
    warmup: int = 0
    tokens_of: Callable[[int], int] | None = None
    timeout: float = 600.0
    min_seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise ValueError(f"requests must be >= 1, got {self.requests}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.min_seconds < 0:
            raise ValueError(f"min_seconds must be >= 0, got {self.min_seconds}")

    def count_tokens(self, indices: Sequence[int]) -> int | None:
        """Model input tokens of the requests ``indices`` (``None`` without ``tokens_of``)."""
        return None if self.tokens_of is None else sum(self.tokens_of(i) for i in indices)


async def _post(session: aiohttp.ClientSession, url: str, body: dict, index: int) -> str | None:
    """POST ``body`` and read the whole answer; ``None`` on success, else a failure note."""
    try:
        async with session.post(url, json=body) as response:
            payload = await response.read()
            if 200 <= response.status < 300:
                return None
            text = payload[:200].decode("utf-8", "replace")
            return f"request {index}: HTTP {response.status}: {text}"
    except (TimeoutError, aiohttp.ClientError) as exc:
        return f"request {index}: {type(exc).__name__}: {exc}"


def _session(connections: int, timeout: float) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout))


async def _run_phase(
    session: aiohttp.ClientSession,
    url: str,
    make_body: Callable[[int], dict],
    concurrency: int,
    indices: range,
    min_seconds: float = 0.0,
) -> tuple[list[float], list[int], float, list[str]]:
    """Send the requests numbered ``indices`` with ``concurrency`` closed-loop workers, and
    the ones numbered on from there (in the range's step) until ``min_seconds`` have passed
    since the start.

    Returns latencies and indices of the successful requests, wall seconds, failure notes.
    """
    latencies: list[float] = []
    ok: list[int] = []
    failures: list[str] = []
    started = time.perf_counter()

    def numbers() -> Iterator[int]:
        yield from indices
        # On past the range in its own step, so that processes sending every p-th number
        # (:func:`closed_loop_processes`) never send the same one.
        index = indices.start + len(indices) * indices.step
        while time.perf_counter() - started < min_seconds:
            yield index
            index += indices.step

    pending = numbers()

    async def worker() -> None:
        # ``next`` on a shared iterator is safe: workers only interleave at ``await``.
        for index in pending:
            body = make_body(index)
            started = time.perf_counter()
            failure = await _post(session, url, body, index)
            if failure is None:
                latencies.append(time.perf_counter() - started)
                ok.append(index)
            else:
                failures.append(failure)

    workers = concurrency if min_seconds > 0 else min(concurrency, len(indices)) or 1
    await asyncio.gather(*(worker() for _ in range(workers)))
    wall = time.perf_counter() - started
    return latencies, ok, wall, failures


async def _measure(
    work: Workload,
    clients: int,
    around: contextlib.AbstractContextManager,
    first: int = 0,
    step: int = 1,
) -> dict[str, Any]:
    """One closed loop of ``clients``: the warm-up numbers ``first, first + step, ...`` below
    ``work.warmup``, then, inside ``around``, the measured ones from ``work.warmup + first`` in
    the same step (numbered on until ``work.min_seconds`` have passed). Returns the raw
    figures :func:`_point_of` combines."""
    url, make_body = work.url, work.make_body
    async with _session(clients, work.timeout) as session:
        warm = range(first, work.warmup, step)
        if len(warm):
            _, _, warm_wall, failures = await _run_phase(session, url, make_body, clients, warm)
            logger.info(
                "warm-up: %d requests in %.1f s, %d errors", len(warm), warm_wall, len(failures)
            )
            for failure in failures[:3]:
                logger.warning("warm-up failure: %s", failure)
        with around:
            cpu, start = time.process_time(), time.monotonic()
            latencies, ok, _, failures = await _run_phase(
                session, url, make_body, clients,
                range(work.warmup + first, work.warmup + work.requests, step), work.min_seconds,
            )  # fmt: skip
            end, cpu = time.monotonic(), time.process_time() - cpu
    return {
        "latencies": latencies, "ok": ok, "failures": len(failures), "notes": failures[:3],
        "start": start, "end": end, "cpu": cpu,
    }  # fmt: skip


def _point_of(parts: Sequence[dict[str, Any]], work: Workload, concurrency: int) -> Point:
    """The point of one or more :func:`_measure` results that ran at the same time: wall time
    from the first start to the last answer, ``client_cpu_share`` the busiest one's."""
    wall = max(part["end"] for part in parts) - min(part["start"] for part in parts)
    for note in [note for part in parts for note in part["notes"]][:3]:
        logger.warning("failure: %s", note)
    point = replace(
        summarize(
            [value for part in parts for value in part["latencies"]], wall,
            sum(part["failures"] for part in parts), concurrency=concurrency,
            tokens=work.count_tokens([index for part in parts for index in part["ok"]]),
        ),
        client_cpu_share=max(part["cpu"] / (part["end"] - part["start"]) for part in parts),
    )  # fmt: skip
    logger.info(
        "concurrency %d (%d load generator processes): %d ok, %d errors, %.2f req/s, p50 %s ms, "
        "p95 %s ms, busiest client CPU %.0f %%", concurrency, len(parts), point.count,
        point.errors, point.req_per_s, _fmt(point.p50_ms), _fmt(point.p95_ms),
        100 * (point.client_cpu_share or 0),
    )  # fmt: skip
    return point


async def closed_loop(
    work: Workload, concurrency: int, *, monitor: contextlib.AbstractContextManager | None = None
) -> Point:
    """Measure ``work`` at ``concurrency`` clients: the warm-up requests first, the measured
    ones once every warm-up request has finished. ``monitor`` (e.g. a
    :class:`~vllm_factory.testing.usage.Usage`) is entered around the measured part only."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    part = await _measure(work, concurrency, monitor or contextlib.nullcontext())
    return _point_of([part], work, concurrency)


def _shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal whole shares (the first ones one larger)."""
    base, extra = divmod(total, parts)
    return [base + (k < extra) for k in range(parts)]


@contextlib.contextmanager
def _at(barrier: Any, timeout: float) -> Iterator[None]:
    """Enter once every party has reached ``barrier``."""
    barrier.wait(timeout=timeout)
    yield


def _client_process(
    work: Workload, clients: int, k: int, processes: int, barrier: Any, results: Any
) -> None:
    """One process of :func:`closed_loop_processes`: its ``clients`` send the numbers ``k,
    k + processes, ...``; the measured part starts at ``barrier``."""
    try:
        results.put(asyncio.run(_measure(work, clients, _at(barrier, work.timeout), k, processes)))
    except Exception as exc:  # noqa: BLE001 - the parent must hear of it, not wait for it
        barrier.abort()
        results.put({"error": f"{type(exc).__name__}: {exc}"})


def closed_loop_processes(
    work: Workload,
    concurrency: int,
    processes: int,
    *,
    monitor: contextlib.AbstractContextManager | None = None,
) -> Point:
    """:func:`closed_loop` with the ``concurrency`` clients spread over ``processes`` forked
    load generator processes, for rates past what one Python process can send and read (on the
    H200, one process used half a core at 1250 req/s of ColBERT answers); with one process,
    :func:`closed_loop` in this one.

    Process ``k`` sends the bodies numbered ``k, k + processes, ...`` (warm-up, measured and,
    with ``min_seconds``, numbered on), so every number is sent once. The measured part starts
    in every process at once, after all warm-ups; its wall time runs from the first start to
    the last answer. ``client_cpu_share`` is the busiest process's. Processes are forked, as
    ``work.make_body`` need not pickle: call this from a thread-light parent.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    processes = min(processes, concurrency)
    if processes == 1:
        return asyncio.run(closed_loop(work, concurrency, monitor=monitor))
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes + 1)
    results = context.Queue()
    children = [
        context.Process(
            target=_client_process,
            args=(work, clients, k, processes, barrier, results),
            name=f"loadgen-{k}",
            daemon=True,
        )
        for k, clients in enumerate(_shares(concurrency, processes))
    ]
    with warnings.catch_warnings():
        # Python 3.12 warns of fork() beside threads; a child only runs its own new event loop.
        warnings.simplefilter("ignore", DeprecationWarning)
        for child in children:
            child.start()
    parts: list[dict[str, Any]] = []
    try:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=work.timeout)
        with monitor or contextlib.nullcontext():
            for _ in children:
                parts.append(results.get(timeout=work.timeout + work.min_seconds + 60))
                if "error" in parts[-1]:
                    break
    finally:
        for child in children:
            child.join(timeout=5)
            if child.is_alive():
                child.terminate()
    errors = [part["error"] for part in parts if "error" in part]
    if errors:
        raise RuntimeError(f"load generator process failed: {errors[0]}")
    return _point_of(parts, work, concurrency)


async def open_loop(
    work: Workload,
    rate: float,
    *,
    seed: int = 0,
    max_connections: int = 256,
    monitor: contextlib.AbstractContextManager | None = None,
) -> Point:
    """Measure ``work`` with its requests sent at Poisson arrivals of ``rate``/s.

    Warm-up requests are sent one after another, unmeasured. The measured ones follow
    :func:`poisson_schedule` (``seed``); each latency runs from the scheduled instant to the
    answer. The wall time runs from the first scheduled instant to the last answer, so
    ``req_per_s`` is the achieved rate (below ``rate`` when the server falls behind).
    ``concurrency`` of the point is the most requests ever in flight at once. ``monitor`` is
    entered around the measured part only.
    """
    url, make_body = work.url, work.make_body
    warmup, requests = work.warmup, work.requests
    schedule = poisson_schedule(rate, requests, seed)
    latencies: list[float] = []
    ok: list[int] = []
    failures: list[str] = []
    in_flight = 0
    peak = 0
    async with _session(max_connections, work.timeout) as session:
        if warmup:
            await _run_phase(session, url, make_body, 1, range(warmup))

        async def send(index: int, due: float) -> None:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                failure = await _post(session, url, make_body(index), index)
            finally:
                in_flight -= 1
            if failure is None:
                latencies.append(time.perf_counter() - due)
                ok.append(index)
            else:
                failures.append(failure)

        with monitor or contextlib.nullcontext():
            cpu = time.process_time()
            started = time.perf_counter()
            tasks = []
            for offset, instant in enumerate(schedule):
                due = started + instant
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(send(warmup + offset, due)))
            await asyncio.gather(*tasks)
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu
    for failure in failures[:3]:
        logger.warning("failure: %s", failure)
    point = replace(
        summarize(latencies, wall, len(failures), concurrency=peak, tokens=work.count_tokens(ok)),
        mode="open",
        offered_rate=rate,
        client_cpu_share=cpu / wall,
    )
    logger.info(
        "open loop %.2f req/s offered: %d ok, %d errors, %.2f req/s achieved, p50 %s ms",
        rate, point.count, point.errors, point.req_per_s, _fmt(point.p50_ms),
    )  # fmt: skip
    return point


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"
