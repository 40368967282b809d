"""vLLM's start-up passes (dummy pooler runs at the shapes a CUDA engine uses, then requests
that carry no prompt layout) through this package's model, adapter and GLiNER2 head: empty
results, never an exception in the engine."""

from pathlib import Path

from vllm_factory.testing.startup import check_report, startup_report


def test_engine_start_up_passes(reference_dir: Path):
    report = startup_report(reference_dir / "checkpoint", config_format="gliner2")
    check_report(report, (0,))
