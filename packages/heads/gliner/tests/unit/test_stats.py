"""Engine-side counters reach the API process's /metrics through a shared folder (the
Prometheus side where prometheus_client, which comes with vLLM, is installed)."""

import importlib.metadata as md
import json
import os
import subprocess
import sys
import time

import pytest
from vllm_factory.heads.gliner import stats


def test_counters_are_written_by_a_background_thread_and_summed_over_processes(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(stats.STATS_ENV, str(tmp_path))
    monkeypatch.setattr(stats, "FLUSH_EVERY", 0.05)
    values = {"hits": 1, "misses": 2}
    counters = stats.SharedCounters("probe", lambda: values)
    counters.changed()
    deadline = time.monotonic() + 120  # a state, not a time: bounded only to end a broken run
    while not list(tmp_path.glob("probe-*.json")) and time.monotonic() < deadline:
        time.sleep(0.02)
    (tmp_path / "probe-999999.json").write_text(json.dumps({"hits": 10, "misses": 0}))
    (tmp_path / "probe-broken.json").write_text("{")  # half written: skipped
    assert stats.read_counters("probe") == {"hits": 11, "misses": 2}
    values["hits"] = 5
    counters.flush()
    assert stats.read_counters("probe", tmp_path)["hits"] == 15
    assert stats.read_counters("other", tmp_path) == {}


def test_without_the_folder_counters_are_kept_but_not_shared(monkeypatch):
    monkeypatch.delenv(stats.STATS_ENV, raising=False)
    counters = stats.SharedCounters("probe", lambda: {"hits": 1})
    counters.changed()
    counters.flush()
    assert stats.read_counters("probe") == {}


def test_the_folder_is_created_once_and_inherited():
    code = (
        "import os, subprocess, sys; from vllm_factory.heads.gliner.stats import share_stats_dir, "
        "STATS_ENV; a = share_stats_dir(); b = share_stats_dir(); assert a == b and a.is_dir(); "
        "child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ[%r])' % "
        "STATS_ENV], capture_output=True, text=True).stdout.strip(); assert child == str(a); "
        "print(a)"
    )
    env = {k: v for k, v in os.environ.items() if k != stats.STATS_ENV}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    folder = out.stdout.strip()
    assert folder and not os.path.exists(folder)  # removed when its creator exited


def test_the_folder_is_made_by_the_heads_general_plugin():
    """vLLM loads general plugins in the API process before it starts the engine."""
    plugins = [
        ep.value
        for ep in md.distribution("vllm-factory-gliner").entry_points
        if ep.group == "vllm.general_plugins"
    ]
    assert plugins == ["vllm_factory.heads.gliner.stats:register"]


def test_collector_exposes_counters_and_gauges(tmp_path, monkeypatch):
    pytest.importorskip("prometheus_client")  # comes with vLLM
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
from vllm_factory.heads.gliner import stats

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
    pytest.importorskip("prometheus_client")
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
