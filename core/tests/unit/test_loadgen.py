"""Unit tests for the closed-loop load generator: statistics on synthetic timings, and the
loop itself against an in-process mock transport (no vLLM, no network)."""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import pytest
from vllm_factory.core.testing.loadgen import Point, closed_loop, percentile, summarize

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


# -- closed_loop against a mock transport ----------------------------------------------------


def _mock(delay: float, fail_every: int = 0) -> tuple[httpx.MockTransport, dict]:
    state: dict = {"bodies": [], "in_flight": 0, "max_in_flight": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        state["bodies"].append(body)
        state["in_flight"] += 1
        state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
        try:
            await asyncio.sleep(delay)
        finally:
            state["in_flight"] -= 1
        if fail_every and body["i"] % fail_every == 0:
            return httpx.Response(500, text="boom")
        return httpx.Response(200, json={"ok": True})

    return httpx.MockTransport(handler), state


def test_closed_loop_counts_and_warmup() -> None:
    transport, state = _mock(delay=0.01)
    point = asyncio.run(
        closed_loop(
            "http://test/pooling",
            lambda i: {"i": i},
            concurrency=4,
            requests=20,
            warmup=6,
            transport=transport,
        )
    )
    assert point.count == 20
    assert point.errors == 0
    assert point.concurrency == 4
    assert sorted(b["i"] for b in state["bodies"]) == list(range(26))
    assert state["max_in_flight"] == 4
    assert point.p50_ms is not None and point.p50_ms >= 10.0
    # 20 requests of >= 10 ms on 4 clients take at least 5 rounds.
    assert point.wall_seconds >= 0.05
    assert point.req_per_s == pytest.approx(20 / point.wall_seconds)


def test_closed_loop_records_errors() -> None:
    transport, _ = _mock(delay=0.0, fail_every=5)
    point = asyncio.run(
        closed_loop(
            "http://test/pooling",
            lambda i: {"i": i},
            concurrency=2,
            requests=10,
            warmup=0,
            transport=transport,
        )
    )
    # Indices 0 and 5 fail.
    assert point.errors == 2
    assert point.count == 8


def test_closed_loop_concurrency_above_requests() -> None:
    transport, state = _mock(delay=0.0)
    point = asyncio.run(
        closed_loop(
            "http://test/pooling",
            lambda i: {"i": i},
            concurrency=16,
            requests=3,
            warmup=0,
            transport=transport,
        )
    )
    assert point.count == 3
    assert len(state["bodies"]) == 3


def test_closed_loop_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        asyncio.run(closed_loop("http://x", lambda i: {}, concurrency=0, requests=1, warmup=0))
    with pytest.raises(ValueError):
        asyncio.run(closed_loop("http://x", lambda i: {}, concurrency=1, requests=0, warmup=0))
