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


QUEUE = str(ROOT / "packages" / "testing" / "gpu" / "queue.sh")


def host(tmp_path: Path, repo: Path) -> tuple[dict[str, str], Path]:
    """A stand-in GPU host under ``tmp_path``: its environment and home."""
    home, bin_dir, out = tmp_path / "home", tmp_path / "bin", tmp_path / "out"
    (home / "stage").mkdir(parents=True)
    (home / "dist").mkdir()
    bin_dir.mkdir()
    out.mkdir()
    (home / "stage" / "install.sh").write_text("echo installed\n")
    stub = bin_dir / "python3"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "REPO": str(repo),
        "OUT": str(out),
    }
    return env, home


def test_queue_runs_jobs_in_order_and_wait_packs(tmp_path: Path) -> None:
    env, home = host(tmp_path, ROOT)
    out = Path(env["OUT"])
    jobs = tmp_path / "jobs"
    jobs.write_text(JOBS)
    subprocess.run(["bash", QUEUE, str(jobs)], env=env, check=True, timeout=60)
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
        ["bash", QUEUE, "--wait", "failing", "5"],
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


def test_runs_name_the_staged_commit(tmp_path: Path) -> None:
    """The queue hands the runs the commit stage.py wrote beside the wheels (the host's copy
    of the checkout may carry an older .git)."""
    repo = tmp_path / "repo"
    (repo / ".gpu" / "dist").mkdir(parents=True)
    (repo / ".gpu" / "dist" / "COMMIT").write_text("abc1234\n")
    env, home = host(tmp_path, repo)
    env.pop("VLLM_FACTORY_COMMIT", None)
    jobs = tmp_path / "jobs"
    jobs.write_text('commit 5 echo "commit=$VLLM_FACTORY_COMMIT"\n')
    subprocess.run(["bash", QUEUE, str(jobs)], env=env, check=True, timeout=60)
    assert (home / "res" / "commit.log").read_text() == "commit=abc1234\n"
