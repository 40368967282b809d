"""Unit tests of the bench's long-document workload (``--workload long``): its corpus, words
per second, factors, options and report, on synthetic figures (no vLLM, no timing asserted)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_bench import report_frame
from vllm_factory.testing import bench, long_report
from vllm_factory.testing.loadgen import summarize

POOL = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def _windows(text: str) -> list[int]:
    """A stand-in reading: windows of 100 words sharing 20, one token a word."""
    words = len(text.split())
    starts = range(0, max(words - 20, 1), 80)
    return [min(100, words - s) for s in starts]


def test_documents_have_the_asked_words_and_their_windows_tokens() -> None:
    corpus = bench.build_documents({"300": 1.0, "500": 3.0}, 8, 0, POOL, _windows)
    assert sorted(corpus.buckets) == ["300"] * 2 + ["500"] * 6
    assert corpus.words == [int(bucket) for bucket in corpus.buckets]
    assert all(len(text.split()) == int(b) for text, b in zip(corpus.texts, corpus.buckets))
    assert corpus.windows == [_windows(text) for text in corpus.texts]
    assert corpus.tokens == [sum(w) for w in corpus.windows]
    again = bench.build_documents({"300": 1.0, "500": 3.0}, 8, 0, POOL, _windows)
    assert again.texts == corpus.texts  # seeded
    stats = corpus.stats()
    assert stats["words_total"] == 2 * 300 + 6 * 500
    assert stats["windows_total"] == sum(len(w) for w in corpus.windows)
    assert stats["buckets"]["500"]["words"] == [500]
    assert stats["buckets"]["300"]["windows"] == [4]  # starts 0, 80, 160, 240
    assert stats["chars_max"] == max(map(len, corpus.texts))


def test_a_document_longer_than_a_server_takes_is_refused() -> None:
    with pytest.raises(ValueError, match="characters"):
        bench.build_documents({"400": 1.0}, 1, 0, POOL, _windows, max_chars=1000)


def test_words_per_second_counts_the_timed_documents() -> None:
    corpus = bench.Corpus(["a b", "c d e f"], [2, 4], ["2", "4"], words=[2, 4])
    assert bench.words_per_s(corpus, [0, 1, 2], 2.0) == pytest.approx((2 + 4 + 2) / 2.0)
    assert bench.words_per_s(bench.Corpus(["a"], [1], ["1"]), [0], 1.0) is None
    assert bench.words_per_s(corpus, [0], 0.0) is None


def test_flops_of_a_document_are_summed_over_its_windows() -> None:
    class Spec(bench.PluginSpec):
        def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float | None:
            return 10.0 * tokens

    corpus = bench.Corpus(["x"], [15], ["1"], words=[1], windows=[[10, 5]])
    assert bench.corpus_flops(Spec(), Path("."), corpus) == [150.0]
    plain = bench.Corpus(["x", "y"], [3, 4], ["s", "s"])
    assert bench.corpus_flops(Spec(), Path("."), plain) == [30.0, 40.0]
    assert bench.corpus_flops(bench.PluginSpec(), Path("."), plain) is None


def test_long_workload_options() -> None:
    _, config = bench.parse_args(["--plugin", "p", "--workload", "long", "--device", "cuda"])
    assert config.documents == bench.LONG_DOCUMENTS and config.dtype == "bfloat16"
    assert config.rates == [] and config.rate_fractions == []
    assert 1 in config.batch_sizes and max(config.batch_sizes) > 1
    _, config = bench.parse_args(
        ["--plugin", "p", "--workload", "long", "--documents", "800:1,1200:2",
         "--concurrency", "1,2", "--batch-sizes", "4"]
    )  # fmt: skip
    assert config.documents == {"800": 1.0, "1200": 2.0}
    assert config.concurrencies == [1, 2] and config.batch_sizes == [1, 4]
    with pytest.raises(ValueError):
        bench.parse_documents("short:1")
    # the default workload keeps its presets
    _, plain = bench.parse_args(["--plugin", "p", "--device", "cuda"])
    assert plain.documents == {} and plain.rate_fractions == [0.5, 0.9]


def _point(c: int, rps: float, words: float, **extra: object) -> dict:
    timing = summarize([1.0, 2.0], 2 / rps, 0, concurrency=c, tokens=2000).to_dict()
    return {**timing, "words_per_s": words, **extra}


def _report() -> dict:
    ref = [_point(0, 0.2, 1000.0, batch_size=1), _point(0, 0.5, 2500.0, batch_size=16)]
    return {
        **report_frame("2026-12-05T00:00:00+0000", 4, workload="long"),
        "corpus": {
            "texts": 2,
            "tokens_mean": 4000.0,
            "words_total": 10000,
            "windows_total": 30,
            "chars_max": 31000,
            "buckets": {
                "5000": {
                    "texts": 2,
                    "tokens_min": 3900,
                    "tokens_max": 4100,
                    "words": [5000],
                    "windows": [15],
                }
            },
        },
        "reference": {
            "library": "Lib",
            "versions": {},
            "points": ref,
            "bs1": ref[0],
            "best": ref[1],
            "settings": {"overlap": 96},
        },
        "servers": {
            "plugin": {
                "label": "plugin",
                "points": [_point(1, 1.0, 5000.0), _point(4, 2.0, 10000.0)],
            },
        },
        "matmul": None,
    }


def test_factors_in_words_per_second() -> None:
    f = bench.factors(_report())
    assert f["plugin_peak_words_per_s"] == pytest.approx(10000.0)
    assert f["plugin_peak_words_concurrency"] == 4
    assert f["vs_reference_best_words"] == pytest.approx(4.0)
    assert f["reference_best_words_batch_size"] == 16
    assert f["vs_reference_bs1_words"] == pytest.approx(10.0)


def test_long_report_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = _report()
    report["factors"] = bench.factors(report)
    text = long_report.markdown(report)
    assert "## Long documents: words per second" in text
    assert text.index("## Long documents") < text.index("## Closed loop")
    assert "**10,000 words/s**" in text and "**4.00x**" in text and "**10.00x**" in text
    assert "| plugin | 4 | 2.000 | 10,000 |" in text
    assert "| Lib in process | 16 | 0.500 | 2,500 |" in text
    assert '"overlap": 96' in text
    paths = long_report.write_all(report, tmp_path, "demo-long-quick")
    assert sorted(p.name for p in paths) == [
        "demo-long-quick-latency.png", "demo-long-quick-throughput.png",
        "demo-long-quick-words.png", "demo-long-quick.json", "demo-long-quick.md",
    ]  # fmt: skip
    assert all(p.stat().st_size > 0 for p in paths)
    assert json.loads((tmp_path / "demo-long-quick.json").read_text())["factors"]


def test_gliner_specs_offer_the_long_workload() -> None:
    from vllm_factory.testing.gliner.bench import GLiNERBenchSpec, long_plugin_body
    from vllm_factory.testing.gliner2.bench import GLiNER2BenchSpec
    from vllm_factory.testing.gliner2.bench import long_plugin_body as long2

    assert bench.LONG in GLiNERBenchSpec.workloads and bench.LONG in GLiNER2BenchSpec.workloads
    assert long_plugin_body("m", "t", "float")["data"]["long_text"] == "window"
    assert long2("m", "t", "float")["data"]["long_text"] == "window"
    rng = random.Random(0)
    assert len(bench.word_stream(POOL, 50, rng)) == 50


def test_gliner2_servers_take_prompts_past_the_encoders_positions(tmp_path: Path) -> None:
    """512-token texts and the bench schema make 609-token prompts: vLLM refuses a
    --max-model-len past DeBERTa's 512 positions unless the server's environment allows it, so
    every GLiNER2 server of the default workload starts with it (the long workload's too)."""
    from vllm_factory.testing.gliner2.bench import GLiNER2BenchSpec

    spec = GLiNER2BenchSpec(tmp_path / "bench_spec.py")
    for workload in ("", bench.LONG):
        spec.workload = workload
        servers = spec.servers(tmp_path)
        assert servers and all(
            s.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1" for s in servers
        ), workload
