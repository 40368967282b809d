"""Unit tests for the per-point usage probe: real processes, the real process table (Linux)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from vllm_factory.testing.usage import Usage, process_tree, profile_summary, role_of

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the Linux process table")

# A process that burns CPU_BURNED seconds of its own CPU time once the file GO exists, then
# writes DONE and idles: the CPU it uses inside a window is known however busy the machine is.
CPU_BURNED = 0.2
BURN = (
    "import os, time\n"
    "while not os.path.exists({go!r}): time.sleep(0.01)\n"
    "start = time.process_time()\n"
    "while time.process_time() - start < {seconds}: pass\n"
    "open({done!r}, 'w').close()\n"
    "time.sleep(60)\n"
)
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
# Polls wait for a state, not for a time: the bound only stops a broken test.
WAIT_LIMIT_S = 60.0


def wait_for(predicate, what: str):
    """``predicate()``'s first truthy value, polled until then (``WAIT_LIMIT_S`` at most)."""
    end = time.monotonic() + WAIT_LIMIT_S
    while not (value := predicate()):
        assert time.monotonic() < end, f"still waiting for {what}"
        time.sleep(0.02)
    return value


def test_roles_of_ray_serve_processes() -> None:
    """gliner.serve's tree: the driver (the started process), Ray Serve's replica and proxy
    actors by their titles, Ray's other processes as ``ray``."""
    titles = ["ray::ServeReplica:gliner:GLiNERDeployment", "ray::ProxyActor", "ray::ServeController",
              "ray/core/src/ray/raylet/raylet"]  # fmt: skip
    script = " ".join(f"(exec -a '{title}' sleep 60) &" for title in titles) + " wait"
    server = subprocess.Popen(["bash", "-c", script])
    try:
        expected = ["driver", "proxy", "ray", "ray", "replica"]

        def titled() -> list[str] | None:
            tree = process_tree(server.pid)
            roles = sorted(role_of(pid, server.pid, root_role="driver") for pid in tree)
            # A forked child keeps bash's command line (this script, titles and all) until its
            # exec, so it may pass for another role: wait for the exact roles.
            return roles if roles == expected else None

        assert wait_for(titled, "the four titled children") == expected
    finally:
        subprocess.run(["pkill", "-P", str(server.pid)], check=False)
        server.wait(timeout=10)


def test_tree_roles_and_cpu_of_a_busy_child(tmp_path: Path) -> None:
    """The tree's roles by title, and the CPU each used inside the window: the busy child
    burns a known amount of its own CPU time inside it (asserted as CPU seconds, which do not
    depend on how busy the machine is), the idle ones none; shares are those seconds over the
    window's wall time."""
    go, done = tmp_path / "go", tmp_path / "done"
    burn = BURN.format(go=str(go), done=str(done), seconds=CPU_BURNED)
    script = (
        f"(exec -a VLLM::EngineCore_DP0 sleep 60) & (exec -a VLLM::Worker_TP0 sleep 60) & "
        f'{sys.executable} -c "$BURN" & wait'
    )
    server = subprocess.Popen(["bash", "-c", script], env={**os.environ, "BURN": burn})
    busy = Path(sys.executable).name
    try:
        expected = sorted(["api", "engine", "worker", busy])

        def titled() -> list[str] | None:
            roles = sorted(role_of(pid, server.pid) for pid in process_tree(server.pid))
            # Before its exec the busy child's command line is this script's, which names
            # EngineCore: wait for the exact roles.
            return roles if roles == expected else None

        assert wait_for(titled, "the three children") == expected
        with Usage(server.pid) as usage:
            go.touch()
            wait_for(done.exists, "the busy child's burn")
        # /proc counts CPU time in clock ticks, truncated: allow one tick on each reading.
        assert usage.cpu_seconds[busy] >= CPU_BURNED - 2 / TICKS_PER_SECOND
        assert usage.cpu_seconds["engine"] == usage.cpu_seconds["worker"] == 0.0
        assert usage.seconds > 0
        for role, seconds in usage.cpu_seconds.items():
            assert usage.cpu_shares[role] == round(seconds / usage.seconds, 3)
        assert usage.gpu_busy is None
    finally:
        subprocess.run(["pkill", "-P", str(server.pid)], check=False)
        server.wait(timeout=10)


def test_no_root_measures_nothing() -> None:
    with Usage(None) as usage:
        pass
    assert usage.cpu_shares == {} and usage.gpu_busy is None


def test_profile_summary_counts_inclusive_and_exclusive(tmp_path: Path) -> None:
    frames = [
        {"name": "main", "file": "venv/lib/site-packages/app.py", "line": 1},
        {"name": "tokenize", "file": "tok.py", "line": 7},
        {"name": "respond", "file": "resp.py", "line": 9},
    ]
    samples = [[0, 1]] * 15 + [[0, 2]] * 5 + [[]] * 3  # empty stacks: idle, not counted
    profile = {"name": 'Thread 1 "MainThread"', "samples": samples}
    small = {"name": 'Thread 2 "idle"', "samples": [[0]]}
    path = tmp_path / "p.speedscope.json"
    path.write_text(json.dumps({"shared": {"frames": frames}, "profiles": [profile, small]}))
    text = profile_summary(path, min_samples=10)
    assert '== Thread 1 "MainThread": 20 samples' in text and "idle" not in text
    assert "100.0% main (app.py:1)" in text
    assert " 75.0% tokenize (tok.py:7)" in text and " 25.0% respond (resp.py:9)" in text


def test_profile_summary_names_no_folder_of_the_profiled_machine(tmp_path: Path) -> None:
    """Paths start at the module (after site-packages, the standard library's folder, or a
    ``strip`` prefix), any other absolute path keeps only its last part (the reports' own
    :func:`~vllm_factory.testing.bench_report.portable`), and the processes' root frames
    (command lines) are left out. The paths are made up, under one invented host folder."""
    host = "/srv/profiled-host"
    frames = [
        {"name": f'process 7:"python -m vllm serve {host}/ckpt --port 1"', "file": "", "line": 0},
        {"name": "run", "file": f"{host}/lib/python3.12/threading.py", "line": 3},
        {"name": "step", "file": f"{host}/site/vllm/engine.py", "line": 5},
        {
            "name": "head",
            "file": f"{host}/venv/lib/python3.12/site-packages/pkg/head.py",
            "line": 8,
        },
        {"name": "extra", "file": f"{host}/plugins/mod.py", "line": 2},
    ]
    samples = [[0, 1, 2, 3]] * 10 + [[0, 4]] * 5 + [[0]] * 5  # only the root frame: no top
    profile = {"name": 'Thread 1 "MainThread"', "samples": samples}
    path = tmp_path / "p.speedscope.json"
    path.write_text(json.dumps({"shared": {"frames": frames}, "profiles": [profile]}))
    text = profile_summary(path, min_samples=10, strip=[f"{host}/site/"])
    assert "process 7" not in text and "/ckpt" not in text
    assert " 50.0% run (threading.py:3)" in text
    assert " 50.0% step (vllm/engine.py:5)" in text
    assert " 50.0% head (pkg/head.py:8)" in text
    assert " 25.0% extra (mod.py:2)" in text
    assert host not in text and "/srv" not in text


def test_py_spy_records_the_tree_with_the_extra_options(tmp_path: Path, monkeypatch) -> None:
    """With ``py_spy`` and ``py_spy_args`` the probe runs ``py-spy record`` on the root's whole
    tree for the window, the extra options (e.g. ``--gil``) on its command line, and stops it
    with SIGINT (on which py-spy writes its file). A stand-in ``py-spy`` on ``PATH`` records its
    arguments and, on SIGINT, writes the output file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv, ready = tmp_path / "argv.txt", tmp_path / "ready"
    fake = bin_dir / "py-spy"
    # Python, not bash: a shell cannot trap a signal that was ignored when it started (as SIGINT
    # is in a background job of a non-interactive shell, e.g. CI's lanes); py-spy sets its own
    # handler, as this stand-in does.
    fake.write_text(
        f"#!{sys.executable}\n"
        "import pathlib, signal, sys, time\n"
        "args = sys.argv[1:]\n"
        f"pathlib.Path({str(argv)!r}).write_text('\\n'.join(args) + '\\n')\n"
        "out = pathlib.Path(args[args.index('--output') + 1])\n"
        "def stop(*_):\n"
        "    out.write_text('{}\\n')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"  # the handler is set: SIGINT writes the file
        "while True:\n"
        "    time.sleep(0.05)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    server = subprocess.Popen(["sleep", "60"])
    out = tmp_path / "profiles" / "engine.speedscope.json"
    try:
        with Usage(server.pid, py_spy=out, py_spy_args=["--gil", "--idle"]):
            wait_for(ready.exists, "the stand-in py-spy's trap")
    finally:
        server.kill()
        server.wait(timeout=10)
    args = argv.read_text().split()
    assert args[:4] == ["record", "--pid", str(server.pid), "--subprocesses"]
    assert args[-2:] == ["--gil", "--idle"] and args[args.index("--output") + 1] == str(out)
    assert out.read_text().strip() == "{}"
