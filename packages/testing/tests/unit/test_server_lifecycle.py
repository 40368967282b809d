"""A subprocess server's start and stop, on real processes (Linux)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from vllm_factory.testing import server as server_module
from vllm_factory.testing.server import SubprocessServer, free_port, reserve_port
from vllm_factory.testing.usage import is_running

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the Linux process table")


class FileServer(SubprocessServer):
    """Python's http.server over a folder holding ``health`` (so ``GET /health`` is 200); its
    shell first starts a helper in a session of its own that outlives the server, as Ray's
    actors would without Ray's own shutdown."""

    stop_grace = 1.0

    def __init__(self, folder: Path, pid_file: Path) -> None:
        super().__init__()
        port = self.lease_port()
        self.url = f"http://127.0.0.1:{port}"
        self.label = self.model = "files"
        script = (
            f"setsid sleep 300 & echo $! > {pid_file}; "
            f"exec {sys.executable} -m http.server {port} --bind 127.0.0.1 -d {folder}"
        )
        self.args = ["bash", "-c", script]
        self.env = dict(os.environ)


def test_stop_leaves_no_process_the_server_started(tmp_path: Path) -> None:
    (tmp_path / "health").write_text("ok")
    pid_file = tmp_path / "helper.pid"
    server = FileServer(tmp_path, pid_file)
    with server:
        assert server.is_alive() and server.startup_seconds is not None
        helper = int(pid_file.read_text())
        assert is_running(helper)
    assert not server.is_alive()
    assert server._port_lease is None  # stop() gave the port back
    deadline = time.monotonic() + 120  # a state, not a time: bounded only to end a broken run
    while is_running(helper) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not is_running(helper), "the helper outlived stop()"
    assert "GET /health" in server.log_tail()


class FailingServer(SubprocessServer):
    """Exits during start as a vLLM server whose engine core failed: its own error, then a
    hundred lines, then the API process's wrapper that points "above"."""

    def __init__(self) -> None:
        super().__init__()
        self.url = f"http://127.0.0.1:{free_port()}"
        self.label = self.model = "failing"
        script = (
            "print('(EngineCore pid=7) AssertionError: graph piece 3 expects 4 inputs'); "
            "print('\\n'.join(f'(EngineCore pid=7)   frame {i}' for i in range(100))); "
            "print('(APIServer pid=6) RuntimeError: Engine core initialization failed. "
            "See root cause above. Failed core proc(s): {}'); raise SystemExit(1)"
        )
        self.args = [sys.executable, "-c", script]
        self.env = dict(os.environ)


def test_a_failed_start_names_the_root_cause_from_the_whole_log() -> None:
    from vllm_factory.testing.server import ServerStartError

    with pytest.raises(ServerStartError) as failure, FailingServer():
        pass
    assert failure.value.cause == "AssertionError: graph piece 3 expects 4 inputs"
    assert "graph piece 3" not in str(failure.value)  # beyond the tail the message carries


def flock_from_another_process(port: int) -> int:
    """Exit status of a process that tries to take ``port``'s lease lock (0: it could)."""
    script = (
        "import fcntl, sys; handle = open(sys.argv[1], 'a'); "
        "fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)"
    )
    lock = server_module.PORT_LOCK_DIR / f"{port}.lock"
    command = [sys.executable, "-c", script, str(lock)]
    return subprocess.run(command, check=False, capture_output=True).returncode


def test_a_leased_port_is_passed_over_until_released(monkeypatch) -> None:
    """What happened on an H200: the OS offered two starting servers the same free port. A
    lease makes the second reservation pass it over, in this process and in any other."""
    held = reserve_port()
    assert flock_from_another_process(held.port) != 0
    offers = []

    def offered() -> int:  # the held port first, as the OS did, then what the OS offers
        offers.append(held.port if not offers else free_port())
        return offers[-1]

    monkeypatch.setattr(server_module, "free_port", offered)
    other = reserve_port()
    assert len(offers) == 2 and other.port == offers[1] != held.port
    held.release()
    other.release()
    assert flock_from_another_process(held.port) == 0
    offers.clear()
    again = reserve_port()
    assert again.port == held.port  # released, it is handed out again
    again.release()


class PortServer(SubprocessServer):
    """Python's http.server on the port ``--port`` names, over a folder holding ``health``."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.port = self.lease_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.label = self.model = "files"
        script = (
            "import functools, http.server, sys; "
            "handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1]); "
            "http.server.HTTPServer(('127.0.0.1', int(sys.argv[3])), handler).serve_forever()"
        )
        self.args = [sys.executable, "-c", script, str(folder), "--port", str(self.port)]
        self.env = dict(os.environ)


def test_a_start_that_finds_its_port_taken_starts_again_on_another(tmp_path: Path) -> None:
    """What a CI run met: a process that binds port 0 (an engine's internal socket) was handed
    the port a starting server had leased, and the server exited with EADDRINUSE."""
    import socket

    (tmp_path / "health").write_text("ok")
    server = PortServer(tmp_path)
    taken = server.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        with server:
            assert server.port != taken and server.url.endswith(f":{server.port}")
            assert server.args[-1] == str(server.port)
            assert server.healthy()
    assert server._port_lease is None
