"""``packages/testing/gpu/queue.sh`` on the CPU machine: the set-up's steps stand in as stubs (a ``python3`` that
succeeds, an ``install.sh`` that echoes), so what is checked is the queue itself: jobs in order
with ``R`` set, a job's timeout and exit code in the progress file, no job reading the jobs file
through its stdin, and ``--wait`` packing the results folder."""

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

JOBS = """\
# a comment, then a blank line

first 20 echo "results in $R"
slow 1 sleep 5
reader 5 cat; echo read-nothing
failing 5 exit 3
"""


def test_queue_runs_jobs_in_order_and_wait_packs(tmp_path: Path) -> None:
    home, bin_dir, out = tmp_path / "home", tmp_path / "bin", tmp_path / "out"
    (home / "stage").mkdir(parents=True)
    (home / "dist").mkdir()
    bin_dir.mkdir()
    out.mkdir()
    (home / "stage" / "install.sh").write_text("echo installed\n")
    stub = bin_dir / "python3"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    jobs = tmp_path / "jobs"
    jobs.write_text(JOBS)
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "REPO": str(ROOT),
        "OUT": str(out),
    }
    queue = str(ROOT / "packages" / "testing" / "gpu" / "queue.sh")
    subprocess.run(["bash", queue, str(jobs)], env=env, check=True, timeout=60)
    progress = (home / "res" / "progress").read_text().splitlines()
    assert [line.split()[:3] for line in progress] == [
        ["setup", "rc", "0"],
        ["first", "rc", "0"],
        ["slow", "rc", "124"],  # stopped by its timeout
        ["reader", "rc", "0"],
        ["failing", "rc", "3"],
        ["all", "rc", "0"],
    ]
    assert (home / "res" / "first.log").read_text() == f"results in {home / 'res'}\n"
    assert (home / "res" / "reader.log").read_text() == "read-nothing\n"
    assert "installed" in (home / "res" / "setup.log").read_text()
    waited = subprocess.run(
        ["bash", queue, "--wait", "failing", "5"],
        env=env,
        check=True,
        timeout=30,
        capture_output=True,
        text=True,
    )
    assert "failing rc 3" in waited.stdout
    with tarfile.open(out / "q.tgz") as packed:
        names = set(packed.getnames())
    assert {"res/progress", "res/first.log", "res/setup.log"} <= names
