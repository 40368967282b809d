"""vLLM's start-up passes (dummy pooler runs at the shapes a CUDA engine uses, then requests
that carry no per-request data) through this package's model, adapter and ColBERT head."""

from __future__ import annotations

from pathlib import Path

from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.heads.colbert.settings import read_colbert_settings
from vllm_factory.testing.startup import check_report, startup_report

# What a package's test module collects (``from ... import *``).
__all__ = ["test_engine_start_up_passes"]


def test_engine_start_up_passes(checkpoint: Path, colbert_package):
    dim = read_colbert_settings(CheckpointFiles(str(checkpoint))).dense[-1].out_features
    report = startup_report(
        checkpoint,
        io_processor_plugin=colbert_package.io_processor,
        hf_overrides={"architectures": [colbert_package.architecture]},
    )
    check_report(report, (None, dim))  # one normalised vector per token
    for p in report.passes:
        if p.kind != "request":  # a dummy pass: its outputs cover all its tokens
            assert sum(shape[0] for shape in p.shapes) >= p.num_tokens, p
