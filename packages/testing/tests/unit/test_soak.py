"""The soak report's windows and verdicts, from made-up records and memory samples."""

from __future__ import annotations

from vllm_factory.testing.soak import WINDOW_S, verdicts, windows

MIB = 2**20


def _run(rss_of, minutes: float = 3.0, status: int = 200, latency_s: float = 0.05):
    """Records every second and memory samples every 2 s for ``minutes`` from t = 0."""
    start = 0.0
    seconds = int(minutes * 60)
    records = [(float(t), latency_s, status, False) for t in range(seconds)]
    memory = [
        (float(t), {"api": 500 * MIB, "worker": rss_of(t) * MIB}) for t in range(0, seconds, 2)
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
    records.append((31.0, 0.01, 200, False))
    assert len(windows(start, records, memory)) == 4
    assert [w["t"] for w in windows(start, records, memory, end=30.0)] == [0.0, 10.0, 20.0]
