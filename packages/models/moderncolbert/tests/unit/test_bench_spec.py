"""The benchmark spec's FLOPs formula (used for MFU on GPU), on hand-computed shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_spec
from vllm_factory.testing.colbert import bench

# One global layer then two sliding-window layers (window: local_attention + 1 = 3 keys).
CONFIG = {"hidden_size": 4, "intermediate_size": 6, "num_hidden_layers": 3,
          "global_attn_every_n_layers": 3, "local_attention": 2}  # fmt: skip
SHAPE = {"config": CONFIG, "dim": 3}


def test_flops_short_sequence_all_layers_see_everything() -> None:
    # n = 3 <= local + 1: every layer attends over 3 tokens.
    per_layer = 8 * 16 + 6 * 4 * 6  # QKV + out + GeGLU in/out = 272
    attention = 4 * 4 * 3 * 3  # 3 layers, ctx 3
    dense = 2 * 4 * 3
    assert bench_spec.flops_per_sequence(SHAPE, 3) == 3 * (3 * per_layer + attention + dense)


def test_flops_sliding_window_caps_local_context() -> None:
    n = 10
    per_token = 3 * 272 + 4 * 4 * (1 * n + 2 * 3) + 2 * 4 * 3
    assert bench_spec.flops_per_sequence(SHAPE, n) == pytest.approx(n * per_token)


def test_bench_model_is_about_two_flops_per_parameter() -> None:
    config = {"hidden_size": 768, "intermediate_size": 1152, "num_hidden_layers": 22,
              "global_attn_every_n_layers": 3, "local_attention": 128}  # fmt: skip
    shape = {"config": config, "dim": 128}  # 8 global and 14 sliding-window layers
    per_token = bench_spec.flops_per_sequence(shape, 512) / 512
    assert per_token == pytest.approx(238.9e6, rel=1e-3)


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_bodies_ask_both_servers_for_the_same_encoding(encoding: str) -> None:
    native, plugin = bench_spec.SPEC.servers(Path("ckpt"))
    assert native.make_body("m", "t", encoding)["encoding_format"] == encoding
    data = plugin.make_body("m", "t", encoding)["data"]
    assert data["text"] == "t" and data["is_query"] is False
    assert data.get("encoding_format", "float") == encoding


def test_base64_fp16_asks_both_servers_for_float16_numbers() -> None:
    native, plugin = bench_spec.SPEC.servers(Path("ckpt"))
    body = native.make_body("m", "t", "base64-fp16")
    assert (body["encoding_format"], body["embed_dtype"]) == ("base64", "float16")
    data = plugin.make_body("m", "t", "base64-fp16")["data"]
    assert (data["encoding_format"], data["embed_dtype"]) == ("base64", "float16")


def test_checks_accept_both_encodings_and_reject_empty_answers() -> None:
    import base64

    packed = base64.b64encode(bytes(4 * 2 * 3)).decode()
    # One text a body: its base64 item, or its float vectors themselves.
    bench.check_plugin({"data": {"embeddings": packed, "num_tokens": 2, "dim": 3}})
    bench.check_plugin({"data": [[0.1, 0.2]]})
    bench.check_native({"data": [{"data": packed}]})
    with pytest.raises(ValueError):
        bench.check_plugin({"data": {"embeddings": packed, "num_tokens": 3, "dim": 3}})
    with pytest.raises(ValueError):
        bench.check_plugin({"data": []})
    with pytest.raises(ValueError):
        bench.check_native({"data": [{"data": []}]})
