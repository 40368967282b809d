"""``packages/testing/gpu/stage.py``'s grouping of the reference folders into parts that travel
to the GPU host one at a time."""

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def _stage():
    spec = importlib.util.spec_from_file_location(
        "gpu_stage", ROOT / "packages" / "testing" / "gpu" / "stage.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_reference_folders_are_grouped_whole_into_parts_under_the_limit(tmp_path: Path):
    source = tmp_path / "artifacts"
    mib = 1024 * 1024
    sizes = {"a": 3, "b": 2, "c": 2, "d": 1, "big": 5}  # MiB; parts of at most 4 MiB
    for name, size in sizes.items():
        (source / name / "checkpoint").mkdir(parents=True)
        (source / name / "checkpoint" / "weights.bin").write_bytes(b"x" * (size * mib))
    parts = _stage().group_folders(source, tmp_path / "parts", 4)
    members = {part.name: sorted(f.name for f in part.iterdir()) for part in parts}
    # every folder once, whole; only the one over the limit makes a part over it
    assert sorted(n for names in members.values() for n in names) == sorted(sizes)
    for names in members.values():
        total = sum(sizes[n] for n in names)
        assert total <= 4 or names == ["big"]
    assert len(parts) == 3  # big | a + d | b + c
    copied = tmp_path / "parts" / next(p for p, n in members.items() if "a" in n) / "a"
    original = source / "a" / "checkpoint" / "weights.bin"
    assert os.path.samefile(copied / "checkpoint" / "weights.bin", original)  # hard links


def test_wheels_are_packed_into_parts_under_the_limit_and_chunked_when_larger(tmp_path: Path):
    loose = tmp_path / "loose"
    loose.mkdir()
    mib = 1024 * 1024
    sizes = {"a.whl": 3, "b.whl": 2, "c.whl": 1, "huge.whl": 9}  # MiB; parts of at most 4 MiB
    for name, size in sizes.items():
        (loose / name).write_bytes(name.encode() * (size * mib // len(name)))
    (tmp_path / "parts").mkdir()
    parts = _stage().pack_parts(loose, tmp_path / "parts", 4)
    files = [f for part in parts for f in part.iterdir()]
    assert not loose.exists()
    for part in parts:
        assert sum(f.stat().st_size for f in part.iterdir()) <= 4 * mib
    chunks = sorted((f for f in files if f.name.startswith("huge.whl.part-")), key=lambda f: f.name)
    assert len(chunks) == 3  # 3 MiB chunks of the 9 MiB wheel
    assert sum(c.stat().st_size for c in chunks) == len(b"huge.whl") * (9 * mib // 8)
    assert {f.name for f in files} - {c.name for c in chunks} == {"a.whl", "b.whl", "c.whl"}
