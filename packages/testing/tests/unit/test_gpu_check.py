"""``packages/testing/gpu/check.py``'s handling of staged references and of failures, on the CPU machine: a
reference whose images another Pillow decoded is re-encoded before the jobs (or named in the
report where this host cannot), and a failing job's table cell names its failing tests."""

import importlib.util
import json
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.testing.refenv import artifact_dir

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location(
        "gpu_check", ROOT / "packages" / "testing" / "gpu" / "check.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def stage(check, packages, plugin: str, pillow: str) -> Path:
    """A complete reference folder for ``plugin`` where the check looks, its encoding recorded
    as made with ``pillow``."""
    reference = check._reference_module(plugin, packages).REFERENCE
    target = artifact_dir(reference.name, reference._artifact_inputs())
    target.mkdir(parents=True)
    meta = {"versions": {"pillow": pillow}}
    np.savez(target / "ref-colpali.npz", image_0=np.ones((2, 3)), meta_json=json.dumps(meta))
    (target / ".complete").write_text("{}")
    return target


def test_references_decoded_by_another_pillow_are_re_encoded(check, tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_FACTORY_ARTIFACTS", str(tmp_path))
    packages = check.model_packages(["nemotron_colembed", "colqwen3", "moderncolbert"])
    installed = metadata.version("pillow")
    stage(check, packages, "nemotron_colembed", "1.0.0")
    stage(check, packages, "colqwen3", installed)
    # moderncolbert: no staged folder, and no image reference at all
    assert check.drifted_references(packages) == {"nemotron_colembed": ("1.0.0", installed)}

    calls = []
    monkeypatch.setattr(check, "reencode", lambda plugins, _: calls.append(plugins) or {
        p: [f"{p}/ref-colpali.npz"] for p in plugins})  # fmt: skip
    done, left = check.reencode_drifted(packages, skip=[])
    assert calls == [["nemotron_colembed"]] and left == {}
    assert done == {"nemotron_colembed": ["nemotron_colembed/ref-colpali.npz"]}
    assert check.reencode_drifted(packages, skip=["nemotron_colembed"]) == ({}, {})


def test_a_reference_this_host_cannot_encode_is_named_not_fatal(check, tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_FACTORY_ARTIFACTS", str(tmp_path))
    packages = check.model_packages(["nemotron_colembed"])
    stage(check, packages, "nemotron_colembed", "1.0.0")

    def missing_library(plugins, _):
        raise RuntimeError("encoding failed\nModuleNotFoundError: No module named 'transformers'")

    monkeypatch.setattr(check, "reencode", missing_library)
    done, left = check.reencode_drifted(packages, skip=[])
    assert done == {}
    assert left["nemotron_colembed"].startswith("Pillow 1.0.0 there")
    assert left["nemotron_colembed"].endswith("No module named 'transformers'")

    header = {"gpu": "g", "finished": "now", "versions": {}, "commands": [], "parallel": 1,
              "sharing_args": [], "references_decoded_elsewhere": left}  # fmt: skip
    check.write_results(tmp_path, [], header)
    report = (tmp_path / "gpu-check.md").read_text()
    assert "nemotron_colembed: Pillow 1.0.0 there" in report


def test_a_failed_job_names_its_failing_tests(check):
    result = check.Result("p-float32-default", "p", "float32", "default", "on")
    result.note = "=== short test summary info === | FAILED ..."
    result.failures = [
        {"test": "test_image_parity", "message": "AssertionError: images: Pillow 1 | 2\nmore"},
        {"test": "test_scores", "message": ""},
    ]
    cell = check.failure_summary(result)
    assert cell == "test_image_parity: AssertionError: images: Pillow 1 \\| 2; test_scores"
    result.failures = []
    assert check.failure_summary(result) == "=== short test summary info === \\| FAILED ..."


def test_results_name_no_folder_of_the_host(check, tmp_path):
    """A re-encoding failure's message carries the command it ran (the host's interpreter, its
    checkout, the staged references): written results keep only the last part of each path."""
    reason = ("Pillow 13.0.0 there, 12.3.0 here; not re-encoded: Command '['/srv/host-venv/bin/"
              "python3', '/srv/checkout/testing/src/scripts/colpali_encode.py', '--images', "
              "'/srv/staged/colqwen3-reference-1dd8/images']' returned non-zero exit status 1.")  # fmt: skip
    header = {"gpu": "g", "finished": "now", "versions": {}, "commands": [], "parallel": 1,
              "sharing_args": [], "references_decoded_elsewhere": {"colqwen3": reason}}  # fmt: skip
    check.write_results(tmp_path, [], header)
    for name in ("gpu-check.json", "gpu-check.md"):
        text = (tmp_path / name).read_text()
        assert "colpali_encode.py" in text and "'images'" in text
        assert not any(root in text for root in ("/srv/", "host-venv", "checkout", "staged"))


def test_suites_found_in_integration_or_their_own_folder(check):
    """``--suite parity`` finds tests/integration/test_parity.py and the checkpoint variants'
    suites; ``--suite lora`` the LoRA suite's own folder, tests/lora/test_lora.py, of exactly
    the packages that have one (no ``.lora`` variant of it)."""
    parity = check.model_packages(None)
    assert parity["deberta_gliner"][1] == "tests/integration/test_parity.py"
    assert parity["deberta_gliner.bi_encoder"][1] == "tests/bi_encoder/test_bi_encoder_parity.py"
    lora = check.model_packages(None, "lora")
    assert sorted(lora) == [
        "deberta_gliner", "deberta_gliner2", "mmbert_gliner", "mmbert_gliner2", "mt5_gliner"
    ]  # fmt: skip
    assert {suite for _, suite in lora.values()} == {"tests/lora/test_lora.py"}
