"""Engine-side counters reach the API process's /metrics through a shared folder."""

import json
import os
import subprocess
import sys
import time

from vllm_factory.core import stats


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
        "import os, subprocess, sys; from vllm_factory.core.stats import share_stats_dir, "
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
