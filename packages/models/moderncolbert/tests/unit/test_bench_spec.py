"""The benchmark spec's FLOPs formula (used for MFU on GPU), on hand-computed shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_spec
from vllm_factory.testing.colbert import bench

SHAPE = {
    "hidden": 4, "intermediate": 6, "local": 2, "global_layers": 1, "local_layers": 2, "dim": 3,
}  # fmt: skip


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
    shape = {
        "hidden": 768, "intermediate": 1152, "local": 128, "global_layers": 8,
        "local_layers": 14, "dim": 128,
    }  # fmt: skip
    per_token = bench_spec.flops_per_sequence(shape, 512) / 512
    assert per_token == pytest.approx(238.9e6, rel=1e-3)


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_bodies_ask_both_servers_for_the_same_encoding(encoding: str) -> None:
    native, plugin = bench_spec.SPEC.servers(Path("ckpt"))
    assert native.make_body("m", "t", encoding)["encoding_format"] == encoding
    data = plugin.make_body("m", "t", encoding)["data"]
    assert data["text"] == "t" and data["is_query"] is False
    assert data.get("encoding_format", "float") == encoding


def test_checks_accept_both_encodings_and_reject_empty_answers() -> None:
    import base64

    packed = base64.b64encode(bytes(4 * 2 * 3)).decode()
    bench.check_plugin({"data": [{"embeddings": packed, "num_tokens": 2, "dim": 3}]})
    bench.check_plugin({"data": [{"embeddings": [[0.1, 0.2]], "num_tokens": 1}]})
    bench.check_native({"data": [{"data": packed}]})
    with pytest.raises(ValueError):
        bench.check_plugin({"data": [{"embeddings": packed, "num_tokens": 3, "dim": 3}]})
    with pytest.raises(ValueError):
        bench.check_native({"data": [{"data": []}]})
