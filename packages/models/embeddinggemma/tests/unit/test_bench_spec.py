"""The benchmark spec's FLOPs formula and request bodies, on hand-computed shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_spec

SHAPE = {
    "hidden": 4, "intermediate": 6, "heads": 2, "kv_heads": 1, "head_dim": 2, "window": 2,
    "global_layers": 1, "local_layers": 1, "dense": [(4, 8), (8, 4)],
}  # fmt: skip


def test_flops_count_gqa_projections_window_and_dense_once() -> None:
    n = 10
    per_token = 2 * 4 * (2 + 2) * 2 + 2 * 2 * 2 * 4 + 6 * 4 * 6  # QKV 64 + out 32 + MLP 144
    attention = 4 * 2 * 2 * (n + 3)  # global layer sees n keys, sliding one window + 1
    dense = 2 * 4 * 8 * 2
    expected = n * (2 * per_token + attention) + dense
    assert bench_spec.flops_per_sequence(SHAPE, n) == pytest.approx(expected)


def test_bodies_and_checks() -> None:
    native, plugin = bench_spec.SPEC.servers(Path("ckpt"))
    assert native.make_body("m", "t", "float") == {
        "model": "m", "input": "t", "task": "embed", "encoding_format": "float",
    }  # fmt: skip
    assert plugin.make_body("m", "t", "float") == {"model": "m", "data": {"text": "t"}}
    with pytest.raises(ValueError):
        plugin.make_body("m", "t", "base64")
    plugin.check({"data": [0.1, 0.2]})  # one text a body: its vector
    native.check({"data": [{"data": [0.1, 0.2]}]})
    with pytest.raises(ValueError):
        plugin.check({"data": []})
