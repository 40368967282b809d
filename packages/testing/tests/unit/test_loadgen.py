"""Unit tests for the closed-loop load generator: statistics on synthetic timings, and the
loops themselves against a small aiohttp server on the loopback interface, run in the test's
own event loop (no vLLM)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import statistics
import threading
from collections.abc import Awaitable, Callable, Iterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from vllm_factory.testing.loadgen import (
    Point,
    Workload,
    closed_loop,
    closed_loop_processes,
    open_loop,
    percentile,
    poisson_schedule,
    summarize,
)

# -- percentile ------------------------------------------------------------------------------


def test_percentile_single_value() -> None:
    assert percentile([7.0], 0) == 7.0
    assert percentile([7.0], 50) == 7.0
    assert percentile([7.0], 100) == 7.0


def test_percentile_bounds_are_min_and_max() -> None:
    values = [5.0, 1.0, 9.0, 3.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 9.0


def test_percentile_interpolates_linearly() -> None:
    # Sorted 1..10: rank = q/100 * 9.
    values = [float(v) for v in range(10, 0, -1)]
    assert percentile(values, 50) == pytest.approx(5.5)
    assert percentile(values, 95) == pytest.approx(1 + 0.95 * 9)
    assert percentile(values, 99) == pytest.approx(1 + 0.99 * 9)
    assert percentile([0.0, 10.0], 25) == pytest.approx(2.5)


def test_percentile_matches_numpy_linear() -> None:
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    values = rng.lognormal(mean=3.0, sigma=0.5, size=257).tolist()
    for q in (0, 1, 12.5, 50, 90, 95, 99, 99.9, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_does_not_mutate_input() -> None:
    values = [3.0, 1.0, 2.0]
    percentile(values, 50)
    assert values == [3.0, 1.0, 2.0]


@pytest.mark.parametrize("q", [-0.1, 100.1, math.nan])
def test_percentile_rejects_bad_q(q: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0, 2.0], q)


def test_percentile_rejects_empty() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


# -- summarize -------------------------------------------------------------------------------


def test_summarize_synthetic_timings() -> None:
    # 100 requests of 10 ms .. 1000 ms in 4 s of wall time, 2 failures.
    latencies = [i / 100 for i in range(1, 101)]
    point = summarize(latencies, wall_seconds=4.0, errors=2, concurrency=8)
    assert isinstance(point, Point)
    assert point.count == 100
    assert point.errors == 2
    assert point.concurrency == 8
    assert point.req_per_s == pytest.approx(25.0)
    assert point.p50_ms == pytest.approx(505.0)
    assert point.p95_ms == pytest.approx(10 + 0.95 * 99 * 10)
    assert point.p99_ms == pytest.approx(10 + 0.99 * 99 * 10)
    assert point.mean_ms == pytest.approx(505.0)
    assert point.p50_ms <= point.p95_ms <= point.p99_ms


def test_summarize_only_errors() -> None:
    point = summarize([], wall_seconds=1.5, errors=3)
    assert point.count == 0
    assert point.errors == 3
    assert point.req_per_s == 0.0
    assert point.p50_ms is None and point.p95_ms is None and point.p99_ms is None
    assert point.mean_ms is None


def test_summarize_is_json_serialisable() -> None:
    point = summarize([0.1, 0.2], wall_seconds=0.3, errors=0, concurrency=1)
    data = json.loads(json.dumps(point.to_dict()))
    assert data["count"] == 2
    assert data["p50_ms"] == pytest.approx(150.0)


@pytest.mark.parametrize(("wall", "errors"), [(0.0, 0), (-1.0, 0), (1.0, -1)])
def test_summarize_rejects_bad_arguments(wall: float, errors: int) -> None:
    with pytest.raises(ValueError):
        summarize([0.1], wall_seconds=wall, errors=errors)


# -- a local server for the loops ----------------------------------------------------------


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def body(i: int) -> dict:
    return {"i": i}


async def _served(handler: Handler, run: Callable[[str], Awaitable[Point]]) -> Point:
    app = web.Application()
    app.router.add_post("/pooling", handler)
    async with TestServer(app, host="127.0.0.1") as server:
        return await run(str(server.make_url("/pooling")))


def run_closed(handler: Handler, concurrency: int, requests: int, warmup: int, **work) -> Point:
    async def run(url: str) -> Point:
        return await closed_loop(Workload(url, body, requests, warmup, **work), concurrency)

    return asyncio.run(_served(handler, run))


def run_open(handler: Handler, rate: float, requests: int, warmup: int, **options) -> Point:
    work = {k: options.pop(k) for k in ("tokens_of", "timeout") if k in options}

    async def run(url: str) -> Point:
        return await open_loop(Workload(url, body, requests, warmup, **work), rate, **options)

    return asyncio.run(_served(handler, run))


def test_summarize_rates_and_tokens() -> None:
    point = summarize([0.1, 0.2, 0.3, 0.4], wall_seconds=2.0, errors=1, tokens=1000)
    assert point.req_per_s == pytest.approx(2.0)
    assert point.tokens == 1000
    assert point.tokens_per_s == pytest.approx(500.0)
    assert point.p50_ms == pytest.approx(250.0)
    assert point.p99_ms == pytest.approx(397.0)
    assert point.mode == "closed"


def test_summarize_without_tokens_reports_none() -> None:
    point = summarize([0.1], wall_seconds=1.0, errors=0)
    assert point.tokens is None and point.tokens_per_s is None


# -- Poisson schedule -------------------------------------------------------------------------


def test_poisson_schedule_starts_at_zero_and_increases() -> None:
    instants = poisson_schedule(5.0, 50, seed=1)
    assert len(instants) == 50
    assert instants[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(instants))


def test_poisson_schedule_is_seeded() -> None:
    assert poisson_schedule(3.0, 20, seed=7) == poisson_schedule(3.0, 20, seed=7)
    assert poisson_schedule(3.0, 20, seed=7) != poisson_schedule(3.0, 20, seed=8)


def test_poisson_schedule_gap_statistics() -> None:
    rate = 4.0
    instants = poisson_schedule(rate, 20001, seed=0)
    gaps = [b - a for a, b in itertools.pairwise(instants)]
    # Exponential gaps: mean and standard deviation both 1 / rate.
    assert statistics.fmean(gaps) == pytest.approx(1 / rate, rel=0.03)
    assert statistics.pstdev(gaps) == pytest.approx(1 / rate, rel=0.05)
    # Memorylessness: P(gap > 1/rate) = e^-1.
    assert sum(g > 1 / rate for g in gaps) / len(gaps) == pytest.approx(math.exp(-1), abs=0.02)


def test_poisson_schedule_counts_in_windows_have_poisson_variance() -> None:
    instants = poisson_schedule(10.0, 50001, seed=3)
    windows = [0] * int(instants[-1])
    for t in instants:
        if int(t) < len(windows):
            windows[int(t)] += 1
    assert statistics.fmean(windows) == pytest.approx(10.0, rel=0.03)
    assert statistics.pvariance(windows) == pytest.approx(10.0, rel=0.1)


@pytest.mark.parametrize("rate", [0.0, -1.0, float("inf"), float("nan")])
def test_poisson_schedule_rejects_bad_rates(rate: float) -> None:
    with pytest.raises(ValueError):
        poisson_schedule(rate, 3, seed=0)


# -- loops against the local server -----------------------------------------------------------


def _echo(fail: frozenset[int] = frozenset()) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        index = (await request.json())["i"]
        if index in fail:
            return web.Response(status=500, text="boom")
        return web.json_response({"i": index})

    return handler


def test_closed_loop_counts_tokens_of_successes_only() -> None:
    point = run_closed(
        _echo(fail=frozenset({3})), concurrency=2, requests=6, warmup=2, tokens_of=lambda i: 10 * i
    )
    assert point.count == 5 and point.errors == 1
    assert point.tokens == 10 * (2 + 4 + 5 + 6 + 7)
    assert point.tokens_per_s == pytest.approx(point.tokens / point.wall_seconds)


def test_open_loop_sends_every_request_and_reports_rate() -> None:
    seen: list[int] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((await request.json())["i"])
        return web.json_response({})

    point = run_open(
        handler,
        rate=200.0,
        requests=20,
        warmup=3,
        seed=0,
        tokens_of=lambda i: 4,
    )
    assert sorted(seen) == list(range(23))
    assert point.mode == "open" and point.offered_rate == 200.0
    assert point.count == 20 and point.errors == 0
    assert point.tokens == 80
    assert point.concurrency >= 1
    # The last arrival is scheduled at the schedule's end: the run cannot be shorter.
    assert point.wall_seconds >= poisson_schedule(200.0, 20, seed=0)[-1]


def test_open_loop_records_errors() -> None:
    point = run_open(_echo(fail=frozenset({0, 4})), rate=500.0, requests=5, warmup=0)
    assert point.count == 3 and point.errors == 2


# -- configuration and corpus -----------------------------------------------------------------


def _mock(delay: float, fail_every: int = 0) -> tuple[Handler, dict]:
    state: dict = {"bodies": [], "in_flight": 0, "max_in_flight": 0}

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        state["bodies"].append(body)
        state["in_flight"] += 1
        state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
        try:
            await asyncio.sleep(delay)
        finally:
            state["in_flight"] -= 1
        if fail_every and body["i"] % fail_every == 0:
            return web.Response(status=500, text="boom")
        return web.json_response({"ok": True})

    return handler, state


def test_closed_loop_counts_and_warmup() -> None:
    handler, state = _mock(delay=0.01)
    point = run_closed(handler, concurrency=4, requests=20, warmup=6)
    assert point.count == 20
    assert point.errors == 0
    assert point.concurrency == 4
    assert sorted(b["i"] for b in state["bodies"]) == list(range(26))
    assert state["max_in_flight"] == 4
    assert point.p50_ms is not None and point.p50_ms >= 10.0
    # 20 requests of >= 10 ms on 4 clients take at least 5 rounds.
    assert point.wall_seconds >= 0.05
    assert point.req_per_s == pytest.approx(20 / point.wall_seconds)
    # Measured (how much depends on the machine: not asserted).
    assert point.client_cpu_share is not None and point.client_cpu_share >= 0


def test_closed_loop_records_errors() -> None:
    handler, _ = _mock(delay=0.0, fail_every=5)
    point = run_closed(handler, concurrency=2, requests=10, warmup=0)
    # Indices 0 and 5 fail.
    assert point.errors == 2
    assert point.count == 8


def test_closed_loop_concurrency_above_requests() -> None:
    handler, state = _mock(delay=0.0)
    point = run_closed(handler, concurrency=16, requests=3, warmup=0)
    assert point.count == 3
    assert len(state["bodies"]) == 3


def test_closed_loop_goes_on_until_min_seconds() -> None:
    """With ``min_seconds`` the clients keep sending past ``requests``, numbering the bodies
    on, until the measured part has lasted that long; the warm-up is not part of it."""
    handler, state = _mock(delay=0.01)
    point = run_closed(handler, concurrency=4, requests=8, warmup=2, min_seconds=0.3)
    numbers = sorted(b["i"] for b in state["bodies"])
    assert numbers == list(range(len(numbers)))  # every body once, numbered on from 10
    assert point.count == len(numbers) - 2
    # 4 clients at >= 10 ms a request: at most ~120 requests in 0.3 s, far more than 8.
    assert 8 < point.count <= 4 * (0.3 / 0.01 + 1)
    assert point.wall_seconds >= 0.3
    assert state["max_in_flight"] == 4


def test_closed_loop_min_seconds_keeps_at_least_the_requests() -> None:
    handler, state = _mock(delay=0.0)
    point = run_closed(handler, concurrency=2, requests=30, warmup=0, min_seconds=1e-6)
    assert point.count >= 30
    assert sorted(b["i"] for b in state["bodies"])[:30] == list(range(30))


def test_closed_loop_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        asyncio.run(closed_loop(Workload("http://x", lambda i: {}, requests=1), concurrency=0))
    with pytest.raises(ValueError, match="requests"):
        Workload("http://x", lambda i: {}, requests=0)
    with pytest.raises(ValueError, match="warmup"):
        Workload("http://x", lambda i: {}, requests=1, warmup=-1)
    with pytest.raises(ValueError, match="min_seconds"):
        Workload("http://x", lambda i: {}, requests=1, min_seconds=-1.0)


# -- several load generator processes ---------------------------------------------------------


@contextlib.contextmanager
def _threaded(handler: Handler) -> Iterator[str]:
    """The handler served on the loopback interface by an event loop in a thread, so that this
    (blocking) test's forked client processes have something to send to."""
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/pooling", handler)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/pooling"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def test_closed_loop_processes_send_every_number_once() -> None:
    """Three processes share 5 clients: warm-up and measured bodies are each sent once, the
    clients in flight never exceed 5, and the point counts the measured ones only."""
    handler, state = _mock(delay=0.01)
    with _threaded(handler) as url:
        point = closed_loop_processes(Workload(url, body, 30, 6), 5, 3)
    assert sorted(b["i"] for b in state["bodies"]) == list(range(36))
    assert point.count == 30 and point.errors == 0 and point.concurrency == 5
    assert state["max_in_flight"] <= 5
    assert point.req_per_s == pytest.approx(30 / point.wall_seconds)
    assert point.p50_ms is not None and point.p50_ms >= 10.0
    assert point.client_cpu_share is not None and point.client_cpu_share >= 0


def test_closed_loop_processes_with_one_process_is_the_closed_loop() -> None:
    """One process (or fewer clients than processes asked for: here one client) runs
    :func:`closed_loop` in this process, with the same counts."""
    handler, state = _mock(delay=0.0)
    with _threaded(handler) as url:
        point = closed_loop_processes(Workload(url, body, 12, 3), 1, 4)
    assert sorted(b["i"] for b in state["bodies"]) == list(range(15))
    assert point.count == 12 and point.concurrency == 1 and state["max_in_flight"] == 1


def test_closed_loop_processes_go_on_until_min_seconds() -> None:
    handler, state = _mock(delay=0.01)
    with _threaded(handler) as url:
        point = closed_loop_processes(Workload(url, body, 8, 2, min_seconds=0.3), 4, 2)
    numbers = sorted(b["i"] for b in state["bodies"])
    assert len(numbers) == len(set(numbers))  # no number sent twice
    assert numbers[:10] == list(range(10))
    assert point.count == len(numbers) - 2 and point.count > 8
    assert point.wall_seconds >= 0.3


def test_closed_loop_processes_count_errors_and_tokens() -> None:
    handler, _ = _mock(delay=0.0, fail_every=5)
    with _threaded(handler) as url:
        work = Workload(url, body, 20, 0, tokens_of=lambda i: i)
        point = closed_loop_processes(work, 4, 2)
    # 0, 5, 10 and 15 fail; the tokens are those of the others.
    assert point.errors == 4 and point.count == 16
    assert point.tokens == sum(range(20)) - (0 + 5 + 10 + 15)


def test_closed_loop_processes_count_a_dead_server_as_errors() -> None:
    # Nothing listens on port 9: every request fails at connect and is counted, none raises.
    point = closed_loop_processes(Workload("http://127.0.0.1:9/pooling", body, 4, 0), 2, 2)
    assert point.count == 0 and point.errors == 4 and point.p50_ms is None


def test_closed_loop_processes_raise_what_failed_in_a_process() -> None:
    def broken(i: int) -> dict:
        raise KeyError(f"no body {i}")

    with pytest.raises(RuntimeError, match="load generator process failed: KeyError"):
        closed_loop_processes(Workload("http://127.0.0.1:9/pooling", broken, 4, 2), 2, 2)


def test_closed_loop_processes_reject_bad_arguments() -> None:
    work = Workload("http://x", body, requests=1)
    with pytest.raises(ValueError, match="concurrency"):
        closed_loop_processes(work, 0, 2)
    with pytest.raises(ValueError, match="processes"):
        closed_loop_processes(work, 2, 0)
