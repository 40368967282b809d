"""``vllm serve GLINER_DIR --config-format gliner``: gliner's own directory, no prep step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from vllm_factory.testing.parity import tolerance
from vllm_factory.testing.server import VllmServer

# What a package's test module collects (``from ... import *``).
__all__ = ["test_gliner_directory_serves_without_prep"]


def test_gliner_directory_serves_without_prep(reference_dir: Path, corpus, reference_scores):
    checkpoint = reference_dir / "checkpoint"
    assert not (checkpoint / "config.json").exists()  # gliner's layout, untouched
    name, labels = next(iter(corpus["label_sets"].items()))
    with VllmServer(checkpoint, extra_args=["--config-format", "gliner"]) as server:
        response = server.pooling(
            {"text": corpus["texts"], "labels": labels, "return_scores": True}
        )
        assert response.status_code == 200, response.text
        items = response.json()["data"]
        bad = server.pooling({"text": "x", "labels": []})
        assert 400 <= bad.status_code < 500 and "data.labels" in bad.text, bad.text
    assert len(items) == len(corpus["texts"])
    worst = 0.0
    for i, item in enumerate(items):
        ref = reference_scores[f"scores_{name}_{i}"]
        got = np.asarray(item["scores"], dtype=np.float32)
        assert got.shape == ref.shape, (i, got.shape, ref.shape)
        worst = max(worst, float(np.abs(got - ref).max()))
    print(f"\n--config-format gliner: {len(items)} texts, max |diff| vs gliner {worst:.2e}")
    assert worst <= tolerance(server.dtype).score
