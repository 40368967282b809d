"""The soak report's windows and verdicts, from made-up records and process samples."""

from __future__ import annotations

from vllm_factory.testing.soak import WINDOW_S, Sample, describe, per_hostile, verdicts, windows

MIB = 2**20


def _run(rss_of, minutes: float = 3.0, status: int = 200, latency_s: float = 0.05):
    """Records every second and process samples every 2 s for ``minutes`` from t = 0: the API
    process uses half a core, the worker (pid 2) a whole one."""
    start = 0.0
    seconds = int(minutes * 60)
    records = [(float(t), latency_s, status, -1) for t in range(seconds)]
    memory = [
        Sample(
            float(t),
            {"api": 500 * MIB, "worker": rss_of(t) * MIB},
            {1: ("api", t / 2), 2: ("worker", float(t))},
        )
        for t in range(0, seconds, 2)
    ]
    return start, records, memory


def test_windows_keep_peak_and_floor_and_roles() -> None:
    start, records, memory = _run(lambda t: 1000 + (300 if t % 10 == 4 else 0), minutes=0.5)
    timeline = windows(start, records, memory)
    assert [w["t"] for w in timeline] == [0.0, 10.0, 20.0]
    first = timeline[0]
    assert first["req_per_s"] == 10 / WINDOW_S
    assert first["rss_mib"] == 1800.0 and first["rss_floor_mib"] == 1500.0
    assert first["rss_mib_by_role"] == {"api": 500.0, "worker": 1300.0}
    assert first["statuses"] == {"valid 200": 10}
    assert first["cpu_by_role"] == {"api": 0.5, "worker": 1.0}
    assert first["gpu_busy"] is None


def test_cpu_counts_a_process_from_when_it_started_and_gpu_by_window() -> None:
    start, records, memory = _run(lambda t: 1000, minutes=0.5)
    for sample in memory[3:]:  # a second API process from t = 6 s, at a quarter core
        sample.cpu[3] = ("api", (sample.at - 6) / 4)
    gpu = [(float(t), 0.5 if t < 10 else 1.0) for t in range(30)]
    timeline = windows(start, records, memory, gpu=gpu)
    assert timeline[1]["cpu_by_role"] == {"api": 0.75, "worker": 1.0}
    assert [w["gpu_busy"] for w in timeline] == [0.5, 1.0, 1.0]


def test_each_hostile_body_gets_its_statuses_and_latency() -> None:
    hostile = [{"text": ["x" * 30] * 4, "labels": ["a"], "threshold": 0.0}, {"text": "y"}]
    records = [(1.0, 0.2, 200, 0), (2.0, 0.4, 200, 0), (3.0, 0.01, 400, 1), (0.5, 9.0, 200, 0)]
    rows = per_hostile(records, hostile, start=0.9)  # the warm-up answer (t = 0.5) is left out
    assert rows[0] == {"body": "text[4x30], labels[1x1], threshold=0.0", "sent": 2,
                       "statuses": {"200": 2}, "p50_ms": 300.0, "max_ms": 400.0}  # fmt: skip
    assert rows[1]["statuses"] == {"400": 1} and rows[1]["body"] == "text='y'"
    assert describe({"template": "." * 100}) == "template(100 chars)"


def test_activation_peaks_pass_a_rising_floor_fails() -> None:
    peaks = verdicts(*_split(_run(lambda t: 1000 + (800 if t % 10 == 4 else 0))))
    assert peaks["pass"] == {"no_5xx": True, "memory": True, "p99": True}
    assert peaks["memory_growth_after_warmup"] == 0.0

    leak = verdicts(*_split(_run(lambda t: 1000 + 2 * t)))
    assert not leak["pass"]["memory"]
    assert leak["rss_floor_last_minute_mib"] > leak["rss_floor_first_minute_mib"]


def test_server_errors_and_transport_failures_fail() -> None:
    for status in (500, 0):
        report = verdicts(*_split(_run(lambda t: 1000, status=status)))
        assert report["server_errors"] == 180 and not report["pass"]["no_5xx"]


def _split(run):
    start, records, memory = run
    return records, windows(start, records, memory)


def test_answers_after_the_end_are_not_a_window() -> None:
    start, records, memory = _run(lambda t: 1000, minutes=0.5)
    records.append((31.0, 0.01, 200, -1))
    assert len(windows(start, records, memory)) == 4
    assert [w["t"] for w in windows(start, records, memory, end=30.0)] == [0.0, 10.0, 20.0]


def test_a_minutes_p99_is_over_its_answers_and_growing_latency_fails() -> None:
    _, _, memory = _run(lambda t: 1000, minutes=4.0)
    # 20 answers a second; six slow ones together in one window of the first minute after
    # warm-up: 3 % of that window (its p99 is theirs), 0.5 % of the minute (its p99 is not).
    records = [(t / 20, 0.05, 200, -1) for t in range(240 * 20)]
    burst = [(t, 2.0 if 75 <= t < 75.3 else s, status, which) for t, s, status, which in records]
    timeline = windows(0.0, burst, memory)
    assert max(w["p99_ms"] for w in timeline) == 2000.0
    report = verdicts(burst, timeline, 0.0)
    assert report["p99_first_minute_ms"] == 50.0 and report["pass"]["p99"]
    growing = [(t, 0.05 * (1 + t / 60), status, which) for t, s, status, which in records]
    report = verdicts(growing, windows(0.0, growing, memory), 0.0)
    assert report["p99_ratio"] > 1.2 and not report["pass"]["p99"]
