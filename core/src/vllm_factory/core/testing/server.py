"""Start a real vLLM OpenAI-compatible server for tests, demos and benchmarks."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import httpx

logger = logging.getLogger(__name__)

# CPU-friendly defaults: small KV cache, no hub access, eager mode (no inductor compile).
DEFAULT_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerStartError(RuntimeError):
    pass


class VllmServer:
    """``python -m vllm.entrypoints.openai.api_server`` in a subprocess, as a context manager.

    Uses the module entry point rather than the ``vllm`` script because the CPU build's
    script cannot find the ``vllm`` distribution metadata.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        io_processor_plugin: str | None = None,
        hf_overrides: dict[str, Any] | None = None,
        extra_args: Sequence[str] = (),
        dtype: str = "float32",
        max_model_len: int | None = 512,
        enforce_eager: bool = True,
        env: dict[str, str] | None = None,
        python: str = sys.executable,
        startup_timeout: float = 600.0,
        port: int | None = None,
    ) -> None:
        self.model = str(model)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.startup_timeout = startup_timeout
        self.args = [
            python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", self.model,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--dtype", dtype,
            "--runner", "pooling",
        ]  # fmt: skip
        if max_model_len:
            self.args += ["--max-model-len", str(max_model_len)]
        if enforce_eager:
            self.args.append("--enforce-eager")
        if io_processor_plugin:
            self.args += ["--io-processor-plugin", io_processor_plugin]
        if hf_overrides:
            self.args += ["--hf-overrides", json.dumps(hf_overrides)]
        self.args += list(extra_args)
        self.env = {**os.environ, **DEFAULT_ENV, **(env or {})}
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._log_file = None

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> Self:
        handle, name = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
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
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    self.startup_seconds = time.monotonic() - started
                    logger.info("server healthy after %.1f s", self.startup_seconds)
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self._fail(f"server not healthy after {self.startup_timeout:.0f} s")
        raise AssertionError("unreachable")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

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

    def _fail(self, reason: str) -> None:
        tail = self.log_tail()
        self.stop()
        raise ServerStartError(f"{reason}\n--- server log (tail) ---\n{tail}")

    # -- requests -----------------------------------------------------------------------

    def pooling(self, data: Any, timeout: float = 120.0, **body: Any) -> httpx.Response:
        """POST /pooling with ``{"model": ..., "data": data}``; returns the raw response."""
        payload = {"model": self.model, "data": data, **body}
        return httpx.post(f"{self.url}/pooling", json=payload, timeout=timeout)

    def post(self, path: str, payload: Any, timeout: float = 120.0) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=payload, timeout=timeout)
