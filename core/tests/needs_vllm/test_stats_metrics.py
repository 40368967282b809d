"""The Prometheus side of the shared counters (prometheus_client comes with vLLM)."""

import json
import subprocess
import sys

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


# Runs in a fresh interpreter: prometheus_client picks its multiprocess value store at import.
MULTIPROCESS_SCRAPE = """
import json, os, time
from pathlib import Path
from vllm_factory.core import stats

folder = Path(os.environ[stats.STATS_ENV])
(folder / "probe3-11.json").write_text(json.dumps({"hits": 3, "size": 7}))
(folder / "probe3-12.json").write_text(json.dumps({"hits": 2}))
metrics = {"hits": ("x:probe_hits_total", "hits"), "size": ("x:probe_size", "size")}
assert stats.register_collector("probe3", metrics)
(folder / "probe3-12.json").write_text(json.dumps({"hits": 5}))
time.sleep(stats.FLUSH_EVERY * 2.5)

# What vLLM's /metrics serves with several API servers: the multiprocess files alone.
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry)
print(generate_latest(registry).decode())
"""


def test_several_api_servers_get_the_counters_from_multiprocess_files(tmp_path):
    """vLLM with --api-server-count > 1 exports prometheus_client's multiprocess files only:
    the summed counters reach them, and follow later changes."""
    (tmp_path / "prom").mkdir()
    (tmp_path / "stats").mkdir()
    env = {
        **__import__("os").environ,
        stats.MULTIPROCESS_ENV: str(tmp_path / "prom"),
        stats.STATS_ENV: str(tmp_path / "stats"),
    }
    out = subprocess.run(
        [sys.executable, "-c", MULTIPROCESS_SCRAPE], env=env, capture_output=True, text=True,
        check=True, timeout=60,
    ).stdout  # fmt: skip
    assert "x:probe_hits_total 8.0" in out, out
    assert "x:probe_size 7.0" in out, out
