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
