"""The Prometheus side of the shared counters (prometheus_client comes with vLLM)."""

import json

from vllm_factory.core import stats


def test_collector_exposes_counters_and_gauges(tmp_path, monkeypatch):
    from prometheus_client import CollectorRegistry, generate_latest

    monkeypatch.setenv(stats.STATS_ENV, str(tmp_path))
    (tmp_path / "probe2-1.json").write_text(json.dumps({"hits": 3, "size": 7}))
    registry = CollectorRegistry()
    metrics = {"hits": ("x:probe_hits_total", "hits"), "size": ("x:probe_size", "size")}
    assert stats.register_collector("probe2", metrics, registry)
    text = generate_latest(registry).decode()
    assert "x:probe_hits_total 3.0" in text and "x:probe_size 7.0" in text
