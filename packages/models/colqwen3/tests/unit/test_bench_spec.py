"""The benchmark spec without vLLM: request bodies, the native chat template, FLOPs on
hand-computed shapes, page generation and token counts."""

from __future__ import annotations

import base64
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_spec
from vllm_factory.testing import bench
from vllm_factory.testing.colpali import bench as colpali_bench

SPEC = bench_spec.SPEC
DIM = 320

# Text: h 8, 2 query heads and 1 KV head of 4, MLP 16, 2 layers. Vision: v 4, MLP 8, 1 block,
# patch 2, temporal 2, merge 2, one deepstack merger.
TINY = {
    "text_config": {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2,
                    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4},
    "vision_config": {"hidden_size": 4, "intermediate_size": 8, "depth": 1, "patch_size": 2,
                      "temporal_patch_size": 2, "spatial_merge_size": 2,
                      "deepstack_visual_indexes": [0]},
}  # fmt: skip
BENCH = {
    "text_config": {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
                    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128},
    "vision_config": {"hidden_size": 1024, "intermediate_size": 4096, "depth": 24,
                      "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2,
                      "deepstack_visual_indexes": [5, 11, 17]},
}  # fmt: skip


def fake_checkpoint(folder: Path, max_tokens: int = 1280, min_tokens: int = 64) -> Path:
    """config.json, processor_config.json and a safetensors header naming the projection."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_vl", **BENCH}))
    processor = {
        "patch_size": 16,
        "merge_size": 2,
        "temporal_patch_size": 2,
        "size": {"shortest_edge": min_tokens * 1024, "longest_edge": max_tokens * 1024},
    }
    (folder / "processor_config.json").write_text(json.dumps({"image_processor": processor}))
    header = json.dumps({"model.custom_text_proj.weight": {
        "dtype": "F32", "shape": [DIM, 2048], "data_offsets": [0, 0]}}).encode()  # fmt: skip
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    return folder


# -- FLOPs ---------------------------------------------------------------------------------------


def test_flops_text_only() -> None:
    n = 3
    # per layer: q 2*n*8*2*4 + kv 2*(2*n*8*1*4) + out 2*n*2*4*8 + MLP 6*n*8*16;
    # causal attention 4*2*4*n*(n+1)/2.
    per_layer = 2 * n * 8 * 8 + 2 * 2 * n * 8 * 4 + 2 * n * 8 * 8 + 6 * n * 8 * 16
    attention = 4 * 2 * 4 * n * (n + 1) / 2
    parts = colpali_bench.qwen3_vl_flops(TINY, 5, n)
    assert parts["vision"] == 0
    assert parts["language"] == 2 * (per_layer + attention)
    assert parts["projection"] == 2 * n * 8 * 5
    assert parts["total"] == parts["language"] + parts["projection"]


def test_flops_vision_tower() -> None:
    images = 2  # 8 patches of 3*2*2*2 = 24 values
    p = 8
    embed = 2 * p * 24 * 4
    block = 8 * p * 16 + 4 * p * 4 * 8 + 4 * p * p * 4  # QKV + out, MLP, attention
    mergers = 2 * images * (2 * 16 * 16 + 2 * 16 * 8)  # merger + one deepstack merger
    parts = colpali_bench.qwen3_vl_flops(TINY, 5, 10, images)
    assert parts["vision"] == embed + block + mergers
    assert parts["total"] == pytest.approx(sum(v for k, v in parts.items() if k != "total"))


def test_flops_of_a_page_on_the_2b_shapes() -> None:
    # A 768 x 1024 page: 768 image tokens + 12 prompt tokens.
    parts = colpali_bench.qwen3_vl_flops(BENCH, DIM, 780, 768)
    assert parts["vision"] == pytest.approx(2.947e12, rel=1e-3)
    assert parts["language"] == pytest.approx(2.268e12, rel=1e-3)
    assert parts["total"] == pytest.approx(5.217e12, rel=1e-3)


# -- requests ------------------------------------------------------------------------------------


@pytest.fixture
def page(tmp_path: Path) -> Path:
    path = tmp_path / "page.png"
    colpali_bench.draw_page(0, 0, ["alpha", "beta", "gamma"]).save(path)
    return path


@pytest.fixture
def servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(SPEC, "bench_root", lambda: tmp_path / "bench")
    monkeypatch.setattr(SPEC, "workload", "pages")
    checkpoint = fake_checkpoint(tmp_path / "ckpt")
    plugin, native = SPEC.servers(checkpoint)
    return plugin, native


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_page_bodies(servers, page: Path, encoding: str) -> None:
    plugin, native = servers
    raw = base64.b64encode(page.read_bytes()).decode()
    body = plugin.make_body("m", str(page), encoding)
    assert body["model"] == "m" and body["data"]["image"] == raw
    assert body["data"].get("encoding_format", "float") == encoding
    assert "is_query" not in body["data"]
    body = native.make_body("m", str(page), encoding)
    assert body["task"] == "token_embed" and body["encoding_format"] == encoding
    (message,) = body["messages"]
    assert message["role"] == "user"
    assert message["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + raw}}
    ]


def test_page_servers(servers) -> None:
    plugin, native = servers
    assert plugin.name == "plugin" and native.name == "native"  # plugin first: compared first
    assert list(plugin.extra_args[:2]) == ["--config-format", "colpali"]
    assert plugin.hf_overrides is None and plugin.io_processor_plugin is None
    assert native.hf_overrides == {"dim": DIM}
    args = list(native.extra_args)
    assert Path(args[args.index("--chat-template") + 1]).is_file()
    for spec in servers:  # every page is new: no image cache
        assert list(spec.extra_args[-2:]) == ["--mm-processor-cache-gb", "0"]


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_query_bodies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoding: str) -> None:
    monkeypatch.setattr(SPEC, "bench_root", lambda: tmp_path / "bench")
    monkeypatch.setattr(SPEC, "workload", "queries")
    plugin, native = SPEC.servers(fake_checkpoint(tmp_path / "ckpt"))
    data = plugin.make_body("m", "revenue in 2024", encoding)["data"]
    assert data["text"] == "revenue in 2024" and data["is_query"] is True
    assert data.get("encoding_format", "float") == encoding
    body = native.make_body("m", "revenue in 2024", encoding)
    assert body == {"model": "m", "input": "revenue in 2024" + "<|endoftext|>" * 10,
                    "task": "token_embed", "encoding_format": encoding}  # fmt: skip
    assert "--chat-template" not in native.extra_args and not plugin.extra_args[2:]


def test_native_chat_template_renders_the_image_prompt() -> None:
    jinja2 = pytest.importorskip("jinja2")
    text = colpali_bench.native_chat_template(bench_spec.IMAGE_PROMPT, bench_spec.IMAGE_PLACEHOLDER)
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    assert jinja2.Template(text).render(messages=[message]) == bench_spec.IMAGE_PROMPT
    with pytest.raises(ValueError):
        colpali_bench.native_chat_template("no placeholder", bench_spec.IMAGE_PLACEHOLDER)


def test_prompts_are_the_io_processors() -> None:
    pytest.importorskip("vllm")
    from vllm_factory.models.colqwen3.io_processor import ColQwen3IOProcessor

    assert ColQwen3IOProcessor.image_prompt == bench_spec.IMAGE_PROMPT
    assert ColQwen3IOProcessor.query_suffix == bench_spec.QUERY_SUFFIX
    assert bench_spec.IMAGE_PLACEHOLDER in bench_spec.IMAGE_PROMPT


def test_vectors_decode_and_compare() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    packed = base64.b64encode(a.astype("<f4").tobytes()).decode()
    (plugin,) = colpali_bench.plugin_vectors(
        {"data": [{"embeddings": packed, "num_tokens": 3, "dim": 4}]}
    )
    (native,) = colpali_bench.native_vectors({"data": [{"data": packed}]}, 4)
    (listed,) = colpali_bench.native_vectors({"data": [{"data": a.tolist()}]}, 4)
    assert np.array_equal(plugin, a) and np.array_equal(native, a) and np.array_equal(listed, a)
    assert colpali_bench.compare([a], [a])["matches_plugin"] is True
    assert colpali_bench.compare([a], [-a])["matches_plugin"] is False
    assert colpali_bench.compare([a[:2]], [a])["matches_plugin"] is False
    colpali_bench.check_plugin({"data": [{"embeddings": packed, "num_tokens": 3, "dim": 4}]})
    colpali_bench.check_plugin({"data": {"embeddings": packed, "num_tokens": 3, "dim": 4}})
    colpali_bench.check_plugin({"data": a.tolist()})  # one input, float vectors
    colpali_bench.check_native({"data": [{"data": packed}]})
    with pytest.raises(ValueError):
        colpali_bench.check_native({"data": [{"data": []}]})


# -- pages and tokens ----------------------------------------------------------------------------


def test_pages_are_deterministic(tmp_path: Path) -> None:
    words = ["alpha", "beta", "gamma", "delta"]
    first, second = colpali_bench.draw_page(3, 0, words), colpali_bench.draw_page(3, 0, words)
    assert first.tobytes() == second.tobytes() and first.mode == "RGB"
    assert first.size in colpali_bench.PAGE_SIZES
    assert colpali_bench.draw_page(4, 0, words).tobytes() != first.tobytes()
    assert colpali_bench.draw_page(3, 1, words).tobytes() != first.tobytes()
    pixels = np.asarray(first)
    assert (pixels < 128).mean() > 0.01  # text, axes and bars, not a blank page
    paths = colpali_bench.write_pages(tmp_path / "a", 3, 0, words)
    again = colpali_bench.write_pages(tmp_path / "b", 3, 0, words)
    index = json.loads((tmp_path / "a" / "pages.json").read_text())
    assert index == json.loads((tmp_path / "b" / "pages.json").read_text())
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in again]


@pytest.mark.parametrize(
    ("max_tokens", "min_tokens", "size", "expected"),
    [
        (1280, 64, (768, 1024), 768),  # bench: the page as it is, 24 x 32 tiles of 32 px
        (1280, 64, (816, 1056), 26 * 33),
        (256, 4, (768, 1024), 234),  # cpu: scaled down into 256 tokens
    ],
)
def test_image_tokens(tmp_path, max_tokens, min_tokens, size, expected) -> None:
    checkpoint = fake_checkpoint(tmp_path / "ckpt", max_tokens, min_tokens)
    processor = colpali_bench.image_processor_config(checkpoint)
    assert colpali_bench.image_tokens(*size, processor) == expected


def test_generic_runner_keeps_its_corpus_without_a_workload() -> None:
    assert bench.PluginSpec().corpus(bench.BenchConfig("x"), Path(".")) is None
    _, config = bench.parse_args(["--plugin", "colqwen3", "--workload", "queries"])
    assert config.workload == "queries" and SPEC.workloads == ("pages", "queries")
    _, config = bench.parse_args(["--plugin", "moderncolbert"])
    assert config.workload == ""
