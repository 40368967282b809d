"""The ColPali reference kit outside a checkout's layout (found on the GPU host: the testing
kit installed as a wheel, so no ``core/`` folder beside it), its score bound, and how a host
finds staged references and tells which were decoded by another Pillow."""

import json
import math
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
from vllm_factory.testing.colpali.parity import largest_shift, maxsim
from vllm_factory.testing.colpali.references import (
    KIT_INPUTS,
    ColPaliReference,
    image_processing_file,
    pillow_drift,
    recorded_pillow,
)
from vllm_factory.testing.refenv import artifact_dir


def test_artifact_inputs_exist_wherever_the_kit_is_installed():
    assert image_processing_file().name == "image_processing.py"
    assert image_processing_file().is_file()
    for path in KIT_INPUTS:
        assert path.is_file(), path


def test_the_kit_imports_without_core():
    """nox imports reference modules before any venv has our packages: stdlib only."""
    code = (
        "import sys; sys.modules['vllm_factory.core'] = None; "
        "import vllm_factory.testing.colpali.references"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_maxsim_score_moves_at_most_by_the_vector_shifts():
    rng = np.random.default_rng(0)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)
    query, document = unit(rng.normal(size=(5, 16))), unit(rng.normal(size=(9, 16)))
    moved_q = unit(query + 1e-3 * rng.normal(size=query.shape))
    moved_d = unit(document + 1e-3 * rng.normal(size=document.shape))
    bound = largest_shift([moved_q], [query]) + largest_shift([moved_d], [document])
    change = abs(maxsim(moved_q, moved_d) - maxsim(query, document)) / len(query)
    assert 0 < change <= bound
    assert math.isclose(maxsim(query, query), len(query))


def write_reference(folder: Path, meta: dict | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"image_0": np.ones((3, 4), np.float32)}
    if meta is not None:
        arrays["meta_json"] = np.array(json.dumps(meta))
    np.savez(folder / "ref-colpali.npz", **arrays)


def test_pillow_drift_names_the_recorded_and_the_installed_versions(tmp_path):
    installed = metadata.version("pillow")
    assert pillow_drift(tmp_path) is None  # no reference file
    write_reference(tmp_path, None)
    assert pillow_drift(tmp_path) is None  # a reference that records no versions
    write_reference(tmp_path, {"versions": {"pillow": installed}})
    assert recorded_pillow(tmp_path) == installed
    assert pillow_drift(tmp_path) is None
    write_reference(tmp_path, {"versions": {"torch": "2.13.0", "pillow": "1.0.0"}})
    assert pillow_drift(tmp_path) == ("1.0.0", installed)


def tiny_reference(tmp_path: Path) -> ColPaliReference:
    """A ColPali reference of a package folder made up here (its builder can never run)."""
    folder = tmp_path / "pkg" / "reference"
    folder.mkdir(parents=True)
    (folder / "build_checkpoint.py").write_text("raise SystemExit('no building in this test')\n")
    (folder / "corpus.json").write_text("{}")
    return ColPaliReference(folder / "pkg_reference.py", "m:Model", "m:Processor")


def test_a_staged_reference_is_found_without_building(tmp_path, monkeypatch):
    """On a GPU host (no network) the check looks references up and never builds one."""
    monkeypatch.setenv("VLLM_FACTORY_ARTIFACTS", str(tmp_path / "artifacts"))
    reference = tiny_reference(tmp_path)
    assert reference.staged_dir() is None
    assert not (tmp_path / "artifacts").exists()
    target = artifact_dir(reference.name, reference._artifact_inputs())
    target.mkdir(parents=True)
    assert reference.staged_dir() is None  # half copied: no .complete
    (target / ".complete").write_text("{}")
    assert reference.staged_dir() == target
