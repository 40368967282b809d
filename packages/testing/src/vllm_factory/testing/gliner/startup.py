"""vLLM's start-up passes (dummy pooler runs at the shapes a CUDA engine uses, then requests
that carry no word layout) through this package's model, adapter and GLiNER head."""

from __future__ import annotations

from pathlib import Path

from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.heads.gliner.settings import read_settings
from vllm_factory.testing.startup import check_report, startup_report

# What a package's test module collects (``from ... import *``).
__all__ = ["test_engine_start_up_passes"]


def test_engine_start_up_passes(served_dir: Path):
    settings = read_settings(CheckpointFiles(str(served_dir)))
    report = startup_report(served_dir)
    # No word layout, no scores: [0, max_width, labels] and never an exception in the engine.
    check_report(report, (0, settings.max_width, None))
