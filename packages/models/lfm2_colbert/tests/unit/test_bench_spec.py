"""The benchmark spec's FLOPs formula (used for MFU on GPU), on hand-computed shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_spec

SHAPE = {
    "hidden": 4, "intermediate": 6, "kv": 2, "attention_layers": 1, "conv_layers": 2,
    "width": 3, "dim": 3,
}  # fmt: skip


def test_flops_by_hand() -> None:
    n = 5
    ffn = 3 * 6 * 4 * 6  # three layers of SwiGLU
    attention = 4 * 16 + 4 * 4 * 2 + 2 * 4 * (n + 1)  # q+out, k+v, causal scores+sum
    conv = 2 * (8 * 16 + 2 * 4 * 3)
    dense = 2 * 4 * 3
    assert bench_spec.flops_per_sequence(SHAPE, n) == n * (ffn + attention + conv + dense)


def test_bench_model_is_about_two_flops_per_parameter() -> None:
    shape = {
        "hidden": 1024, "intermediate": 4608, "kv": 512, "attention_layers": 6,
        "conv_layers": 10, "width": 3, "dim": 128,
    }  # fmt: skip
    per_token = bench_spec.flops_per_sequence(shape, 512) / 512
    # ~354M parameters without the 65M embedding table: about 2 FLOPs each, plus attention.
    assert per_token == pytest.approx(2 * 289e6, rel=0.05)
