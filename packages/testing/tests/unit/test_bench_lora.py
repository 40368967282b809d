"""Unit tests of the bench's LoRA workload (``--workload lora``): how requests name the
adapters, the servers' flags, the options and the in-process baseline's adapter spread (no
vLLM, no timing asserted)."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from vllm_factory.testing import bench
from vllm_factory.testing.refenv import SCRIPTS


def test_requests_name_the_adapters_in_turn() -> None:
    names = bench.adapter_names(8)
    assert names == [f"a{i}" for i in range(8)]
    picked = [bench.request_model(names, i, "served") for i in range(40)]
    assert Counter(picked) == {name: 5 for name in names}
    # any eight consecutive requests (what eight clients have in flight) name each adapter once
    assert all(len(set(picked[i : i + 8])) == 8 for i in range(len(picked) - 8))
    assert bench.request_model([], 7, "served") == "served"
    with pytest.raises(ValueError):
        bench.adapter_names(0)


def test_lora_server_flags() -> None:
    adapters = {"a0": Path("/x/a0"), "a1": Path("/x/a1")}
    assert bench.lora_args(adapters, 16) == [
        "--enable-lora", "--lora-modules", "a0=/x/a0", "a1=/x/a1", "--max-loras", "2",
        "--max-lora-rank", "16",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        bench.lora_args({}, 16)


def test_lora_options() -> None:
    _, config = bench.parse_args(
        ["--plugin", "deberta_gliner", "--workload", "lora", "--adapters", "4", "--lora-rank", "8"]
    )
    assert (config.workload, config.adapters, config.lora_rank) == ("lora", 4, 8)
    _, default = bench.parse_args(["--plugin", "deberta_gliner", "--workload", "lora"])
    assert (default.adapters, default.lora_rank) == (8, 16)
    assert default.corpus_size == bench.default_config("x", "cpu", False).corpus_size
    with pytest.raises(SystemExit):
        bench.parse_args(["--plugin", "deberta_gliner", "--adapters", "0"])


class _Server:
    """What :class:`bench.ServerRun` reads of a server it has not started."""

    def __init__(self) -> None:
        self.args = ["serve"]
        self.process = None


def test_server_run_spreads_its_requests_over_the_adapters() -> None:
    def body(model: str, text: str, encoding: str) -> dict:
        return {"model": model, "text": text}

    def spec(names: list[str]) -> bench.ServerSpec:
        return bench.ServerSpec(
            "plugin", "plugin", None, None, body, lambda answer: None,
            launch=lambda *_: _Server(), adapter_names=names,
        )  # fmt: skip

    corpus = bench.Corpus(["t0", "t1", "t2"], [1, 1, 1], ["1"] * 3)
    config = bench.BenchConfig("x")
    run = bench.ServerRun(spec(["a0", "a1"]), config, Path("ckpt"), 64, corpus, None, None, None)
    assert [run.make_body(i) for i in range(4)] == [
        {"model": "a0", "text": "t0"}, {"model": "a1", "text": "t1"},
        {"model": "a0", "text": "t2"}, {"model": "a1", "text": "t0"},
    ]  # fmt: skip
    assert run.result["adapters"] == ["a0", "a1"]
    base = bench.ServerRun(spec([]), config, Path("ckpt"), 64, corpus, None, None, None)
    assert base.make_body(1) == {"model": "ckpt", "text": "t1"}
    assert "adapters" not in base.result


def test_lora_workload_is_offered_where_the_package_serves_adapters() -> None:
    for plugin in ("deberta_gliner", "gliner2"):
        assert bench.LORA in bench.load_spec(plugin, None).workloads
    assert bench.LORA not in bench.load_spec("mmbert_gliner", None).workloads
    gliner = bench.load_spec("deberta_gliner", None)
    assert not gliner.has_reference(bench.BenchConfig("x", workload=bench.LORA))
    assert gliner.has_reference(bench.BenchConfig("x"))


def test_gliner_serve_polylora_settings(tmp_path: Path) -> None:
    from vllm_factory.testing.gliner.gliner_serve import (
        polylora_args,
        serve_body,
        write_polylora_manifest,
    )

    manifest = json.loads(write_polylora_manifest(tmp_path, ["a0", "a1"]).read_text())
    assert manifest == {"adapters": [
        {"adapter_id": "a0", "path": "a0", "peft_adapter_name": "default"},
        {"adapter_id": "a1", "path": "a1", "peft_adapter_name": "default"},
    ]}  # fmt: skip
    args = polylora_args(tmp_path, 2, 16, ["query_proj", "dense"])
    assert args[0] == "--enable-polylora"
    assert args[args.index("--polylora-disk-cache-dir") + 1] == str(tmp_path)
    assert args[args.index("--polylora-max-gpu-adapters") + 1] == "2"
    assert args[args.index("--polylora-max-rank") + 1] == "16"
    assert args[args.index("--polylora-adapter-weight-modules") + 1] == "query_proj,dense"
    assert serve_body("t", ["x"], 0.5, adapter_id="a1")["adapter_id"] == "a1"
    assert "adapter_id" not in serve_body("t", ["x"], 0.5)


def _baseline_module():
    spec = importlib.util.spec_from_file_location("baseline_script", SCRIPTS / "baseline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_baseline_spreads_texts_over_the_adapters_as_the_requests() -> None:
    baseline = _baseline_module()
    texts = [f"t{i}" for i in range(6)]
    assert baseline.with_adapters(texts, 0) == texts
    assert baseline.with_adapters(texts, 4) == [
        ("t0", 0), ("t1", 1), ("t2", 2), ("t3", 3), ("t4", 0), ("t5", 1),
    ]  # fmt: skip
    args = SimpleNamespace(adapters="/x/a0,/x/a1,")
    assert baseline.adapter_folders(args) == ["/x/a0", "/x/a1"]
    assert baseline.adapter_folders(SimpleNamespace(adapters="")) == []
