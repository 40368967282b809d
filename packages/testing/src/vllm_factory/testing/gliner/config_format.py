"""``vllm serve GLINER_DIR --config-format gliner``: gliner's own directory, no prep step.

Two tests: the served one (a real server on gliner's directory, scores against gliner's), run
by the family's representative package; and the config one, for every GLiNER package: the
config the parser builds for this package's encoder equals the ``config.json`` of the
prepared directory its main server serves. The parser and the prep step share
``build_config``, and the served test covers vLLM reading a gliner directory, so the other
packages need no second server.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from vllm_factory.testing.gliner.parity import AS_GLINER
from vllm_factory.testing.parity import tolerance

# What a package's test module collects (``from ... import *``): the representative takes
# both; the others import ``test_gliner_directory_config_is_the_prepared_one`` alone.
__all__ = [
    "test_gliner_directory_config_is_the_prepared_one",
    "test_gliner_directory_serves_without_prep",
]


def test_gliner_directory_config_is_the_prepared_one(reference_dir: Path, served_dir: Path):
    from vllm_factory.heads.gliner.config_format import served_config

    checkpoint = reference_dir / "checkpoint"
    assert not (checkpoint / "config.json").exists()  # gliner's layout, untouched
    built = served_config(checkpoint)
    prepared = json.loads((served_dir / "config.json").read_text())
    assert built == prepared
    assert built["architectures"] and built["io_processor_plugin"], built


def test_gliner_directory_serves_without_prep(reference_dir: Path, corpus, reference_scores):
    from vllm_factory.testing.server import VllmServer  # httpx: integration tests only

    checkpoint = reference_dir / "checkpoint"
    assert not (checkpoint / "config.json").exists()  # gliner's layout, untouched
    name, labels = next(iter(corpus["label_sets"].items()))
    with VllmServer(checkpoint, extra_args=["--config-format", "gliner"]) as server:
        response = server.pooling(
            {"text": corpus["texts"], "labels": labels, "return_scores": True, **AS_GLINER}
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
