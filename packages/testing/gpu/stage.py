"""Stage a GPU check for a GPU host that has no network (run on the CPU machine).

Puts under ``<repo>/.gpu/`` (ignored by git), for ``packages/testing/gpu/check.py`` to use there:

- ``dist/``: every wheel of this repository (``pip wheel --no-deps``), and the runtime
  dependencies of those wheels that the GPU image and the vLLM wheelhouse lack
  (``HOST_EXTRAS``, CPython 3.12 manylinux wheels);
- ``artifacts/``: each model package's reference folder (the tiny checkpoint and the
  reference library's fp32 CPU outputs), built here in the reference venvs if missing, and
  ``artifacts-parts/part1..N``: the same folders, hard-linked, grouped into parts small enough
  to travel one at a time (copy each part's folders into ``$HOME/artifacts`` on the host);
- ``serve/part1..N`` (with ``--gliner-serve``): gliner, Ray Serve and flashdeberta for the
  host's reference interpreter (the GLiNER benches' in-process baseline and ``gliner.serve``);
- ``bench-refs/part1..N`` (with ``--bench-references``): gliner and PyLate for the bench
  checkpoints' builders on the host;
- ``wheelhouse/part1..N`` (with ``--wheelhouse``): CUDA vLLM and what the host lacks, from the
  shared wheelhouse script (``$VLLM_FACTORY_WHEELHOUSE_SCRIPT``, by default
  ``../shared/gpu/prepare-wheelhouse.sh`` beside this checkout), in parts small enough to
  travel one at a time; the last part holds ``install.sh``.

    python packages/testing/gpu/stage.py [--wheelhouse] [--gliner-serve] [--bench-references] [--no-references]
        [--python PYTHON]

``--python``: the interpreter that builds the references (it needs this repository's
``vllm-factory-core``, ``vllm-factory-colpali`` and ``vllm-factory-testing`` importable; the
default is the one running this script with their ``src`` folders on its path). See packages/testing/gpu/README.md for how the parts reach the host.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "packages" / "testing" / "tools"))
import workspace

STAGE = ROOT / ".gpu"
# Runtime dependencies of our wheels that neither the GPU image nor the vLLM wheelhouse has.
HOST_EXTRAS = ["orjson>=3.9"]
# Tools of the bench on the host, staged with the bench references.
BENCH_TOOLS = ["py-spy==0.4.3"]
HOST_PLATFORM = ["--python-version", "3.12", "--platform", "manylinux_2_17_x86_64"]
logger = logging.getLogger("gpu.stage")
# Imports every package's reference module and prints its (built or cached) folders: those of
# ``reference_dirs()`` where the module has it (checkpoint variants), else ``reference_dir()``.
BUILD_REFERENCES = """
import importlib, sys
for folder in sys.argv[1:]:
    sys.path.insert(0, folder)
    module = importlib.import_module(folder.rstrip("/").split("/")[-2] + "_reference")
    every = getattr(module, "reference_dirs", None)
    for built in every() if every else [module.reference_dir()]:
        print("built:", built, flush=True)
    for built in getattr(module, "adapter_dirs", list)():  # the LoRA suite's adapters
        print("built:", built, flush=True)
"""


def packages() -> list[Path]:
    """Every workspace package (packages/testing/tools/workspace.py): core, kernels, testing, backbones, heads,
    models."""
    return [package.path for package in workspace.packages()]


def build_wheels(dest: Path) -> list[Path]:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest)]
    subprocess.run([*cmd, *map(str, packages())], check=True)
    download = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest)]
    subprocess.run([*download, "--only-binary=:all:", *HOST_PLATFORM, *HOST_EXTRAS], check=True)
    wheels = sorted(dest.glob("*.whl"))
    logger.info("wheels: %s", ", ".join(w.name for w in wheels))
    # What the GPU host's runs name as their commit (queue.sh): its copy of the checkout may
    # carry an older .git. bench_report.record_stem's form: short commit, + for changes.
    described = subprocess.run(
        ["git", "describe", "--always", "--abbrev=7", "--exclude=*", "--dirty=+"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    (dest / "COMMIT").write_text((described or "nocommit") + "\n")
    return wheels


def reference_folders(python: str) -> list[Path]:
    """Build (or find, cached) every model package's reference folder, and the adapters
    folders of the packages' LoRA suites."""
    folders = sorted(
        {
            str(Path(p).parent)
            for p in glob.glob(str(ROOT / "packages/models/*/reference/*_reference.py"))
        }
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [
                str(ROOT / "core" / "src"),
                str(ROOT / "packages" / "heads" / "colpali" / "src"),  # image processing
                str(ROOT / "packages" / "testing" / "src"),
                os.environ.get("PYTHONPATH", ""),
            ]
        ),
    }
    done = subprocess.run(
        [python, "-c", BUILD_REFERENCES, *folders],
        check=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    # Only the marked lines: the builders' own scripts print to the same stdout.
    marked = [line for line in done.stdout.splitlines() if line.startswith("built: ")]
    return [Path(line.removeprefix("built: ")) for line in marked]


def copy_references(folders: list[Path], dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for folder in folders:
        shutil.copytree(folder, dest / folder.name, ignore=shutil.ignore_patterns("served"))
    logger.info("references: %s", ", ".join(f.name for f in folders))


def group_folders(source: Path, dest: Path, part_mib: int) -> list[Path]:
    """The folders of ``source``, hard-linked into ``dest/part1..N`` of at most ``part_mib``
    MiB each (largest first, each into the first part it fits; a folder larger than that
    travels alone)."""
    if dest.exists():
        shutil.rmtree(dest)
    limit = part_mib * 1024 * 1024

    def size(folder: Path) -> int:
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())

    folders = []
    groups = _groups({f: size(f) for f in source.iterdir() if f.is_dir()}, limit)
    for n, members in enumerate(groups, 1):
        part = dest / f"part{n}"
        for folder in members:
            shutil.copytree(folder, part / folder.name, copy_function=os.link)
        folders.append(part)
    return folders


def _groups(sizes: dict[Path, int], limit: int) -> list[list[Path]]:
    """``sizes``' paths in groups of at most ``limit`` bytes: largest first, each into the first
    group it fits (one larger than ``limit`` alone)."""
    groups: list[tuple[int, list[Path]]] = []
    for path, size in sorted(sizes.items(), key=lambda item: -item[1]):
        fit = next((i for i, (used, _) in enumerate(groups) if used + size <= limit), None)
        if fit is None:
            groups.append((size, [path]))
        else:
            groups[fit] = (groups[fit][0] + size, [*groups[fit][1], path])
    return [members for _, members in groups]


def repack(wheelhouse: Path, part_mib: int) -> list[Path]:
    """Pack the wheelhouse again into ``part1..N`` of at most ``part_mib`` MiB each (the
    checkout travels with every transfer, and transfers carry 64 MiB in all): wheels are
    reassembled from the script's chunks, then packed by :func:`pack_parts` (``install.sh``,
    kept in the last part, joins ``NAME.part-*`` in name order)."""
    files = [f for f in wheelhouse.glob("part*/*") if f.is_file()]
    installer = next(f for f in files if f.name == "install.sh")
    loose = wheelhouse / "loose"
    loose.mkdir()
    chunks: dict[str, list[Path]] = {}
    for f in files:
        if f is installer:
            continue
        if ".whl.part-" in f.name:
            chunks.setdefault(f.name.rsplit(".part-", 1)[0], []).append(f)
        else:
            f.rename(loose / f.name)
    for name, pieces in chunks.items():
        with open(loose / name, "wb") as whole:
            # by chunk name, not by path: part10/ sorts before part2/
            ordered = sorted(pieces, key=lambda piece: piece.name)
            whole.writelines(piece.read_bytes() for piece in ordered)
    kept = installer.read_bytes()
    for old in wheelhouse.glob("part*"):
        shutil.rmtree(old)
    folders = pack_parts(loose, wheelhouse, part_mib)
    (folders[-1] / "install.sh").write_bytes(kept)
    (folders[-1] / "install.sh").chmod(0o755)
    return folders


def pack_parts(loose: Path, dest: Path, part_mib: int) -> list[Path]:
    """Move the files of ``loose`` into ``dest/part1..N`` of at most ``part_mib`` MiB each,
    largest first; a wheel bigger than that travels as ``NAME.part-NN`` chunks (joined in
    name order on the host). ``loose`` is removed."""
    limit = part_mib * 1024 * 1024
    for wheel in list(loose.iterdir()):
        if wheel.stat().st_size > limit:
            data, chunk = wheel.read_bytes(), limit - 1024 * 1024
            for i in range(0, len(data), chunk):
                (loose / f"{wheel.name}.part-{i // chunk:02d}").write_bytes(data[i : i + chunk])
            wheel.unlink()
    folders = []
    for n, members in enumerate(_groups({f: f.stat().st_size for f in loose.iterdir()}, limit), 1):
        folder = dest / f"part{n}"
        folder.mkdir()
        for f in members:
            f.rename(folder / f.name)
        folders.append(folder)
    loose.rmdir()
    return folders


# gliner and gliner.serve on the GPU host (the GLiNER benches' reference and peer server):
# the kit's pins, less torch and what the image has; flashdeberta for --enable-flashdeberta.
KITS = ROOT / "packages" / "testing" / "src" / "vllm_factory" / "testing"
GLINER_KIT = KITS / "gliner"
GLINER_SERVE_EXTRAS = ["flashdeberta==0.0.8"]
# The bench checkpoints' builders on the host (--bench-references): gliner's pins, and PyLate with
# the few of its pinned dependencies the image lacks (enough for both builds on an H200,
# 2026-11-29; the full PyLate venv adds pandas, pyarrow, scipy, ...): ~30 MiB, one transfer.
PYLATE_ON_HOST = {"sentence-transformers", "datasets", "dill", "multiprocess", "ujson"}
IMAGE_PACKAGES = {"torch", "numpy", "sympy", "networkx", "mpmath", "jinja2", "markupsafe",
                  "setuptools"}  # fmt: skip
HOST_INSTALL = """#!/usr/bin/env bash
# Run on the GPU host after every part was copied into $HOME/{stage}/: the reference wheels
# into $HOME/ref (the reference interpreter: PYTHONPATH=$HOME/ref).
set -euo pipefail
shopt -s nullglob
cd "$HOME/{stage}"
for first in *.whl.part-00; do
  name=${{first%.part-00}}; cat "$name".part-* > "$name"; rm "$name".part-*
done
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/ref" ./*.whl
echo "installed into $HOME/ref"
"""


def _distribution(wheel: str) -> str:
    """``Foo_Bar-1.0-...whl`` (or a chunk of it) -> ``foo-bar``."""
    return canonicalize_name(wheel.split("-", 1)[0])


def _pins(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def stage_host_wheels(dest: Path, pins: list[str], stage: str, part_mib: int) -> list[Path]:
    """``dest/part1..N``: CPython 3.12 wheels of ``pins`` for the host, less those the image or
    the vLLM wheelhouse (``.gpu/wheelhouse``, when staged) has; the last part holds
    ``install.sh``, which expects every part in ``$HOME/<stage>/``."""
    if dest.exists():
        shutil.rmtree(dest)
    loose = dest / "loose"
    loose.mkdir(parents=True)
    download = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(loose),
                "--only-binary=:all:", "--implementation", "cp", *HOST_PLATFORM,
                "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
                "--platform", "any"]  # fmt: skip
    wanted = [p for p in pins if canonicalize_name(p.split("==")[0]) not in IMAGE_PACKAGES]
    subprocess.run([*download, *wanted], check=True)
    present = IMAGE_PACKAGES | {
        _distribution(f.name) for f in (STAGE / "wheelhouse").glob("part*/*.whl*")
    }
    for wheel in loose.glob("*.whl"):
        if _distribution(wheel.name) in present:
            wheel.unlink()
    folders = pack_parts(loose, dest, part_mib)
    (folders[-1] / "install.sh").write_text(HOST_INSTALL.format(stage=stage), encoding="utf-8")
    (folders[-1] / "install.sh").chmod(0o755)
    return folders


def gliner_serve_pins() -> list[str]:
    """What gliner and ``python -m gliner.serve`` need (the kit's pins) and flashdeberta."""
    names = ("requirements-gliner.txt", "requirements-gliner-serve.txt")
    return [pin for name in names for pin in _pins(GLINER_KIT / name)] + GLINER_SERVE_EXTRAS


def gliner2_beside_gliner() -> list[str]:
    """gliner2 2.1.0 for the host's reference interpreter, beside gliner: the pins of the
    GLiNER2 kit whose distributions gliner's pins do not name (gliner2, peft, accelerate,
    requests, ...). gliner2 then runs on gliner's transformers (5.3.0; gliner2 takes
    >=4.43,<6), as it did on CPU (``scripts/long_baseline.py --library gliner2``): the GLiNER2
    benches' in-process baseline and their ``--workload long`` (``extract_long``)."""
    gliner = {
        canonicalize_name(pin.split("==")[0])
        for pin in _pins(GLINER_KIT / "requirements-gliner.txt")
    }
    pins = _pins(KITS / "gliner2" / "requirements-gliner2.txt")
    return [pin for pin in pins if canonicalize_name(pin.split("==")[0]) not in gliner]


def bench_reference_pins() -> list[str]:
    """What the GLiNER, GLiNER2 and ColBERT benches' checkpoint builders and in-process
    baselines import on the host (PEFT among gliner2's pins: the LoRA workload's adapters),
    polylora (gliner.serve's ``--enable-polylora``, the GLiNER LoRA workload's peer; its
    triton is the image torch's), and py-spy (the bench's ``--py-spy``; its binary lands in
    ``$HOME/ref/bin``)."""
    pylate = [
        pin
        for pin in _pins(KITS / "colbert" / "requirements-pylate.txt")
        if canonicalize_name(pin.split("==")[0]) in PYLATE_ON_HOST
    ]
    return [
        *_pins(GLINER_KIT / "requirements-gliner.txt"),
        *gliner2_beside_gliner(),
        *pylate,
        *_pins(KITS / "colbert" / "pylate-nodeps.txt"),
        *_pins(GLINER_KIT / "requirements-gliner-polylora.txt"),
        *BENCH_TOOLS,
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheelhouse", action="store_true", help="also (re)build the vLLM parts")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument(
        "--part-mib", type=int, default=36,
        help="wheelhouse parts of at most this size (a transfer carries the checkout too)",
    )  # fmt: skip
    parser.add_argument(
        "--no-references", action="store_true",
        help="skip the reference folders (a benchmark builds its own checkpoint on the host)",
    )  # fmt: skip
    parser.add_argument(
        "--gliner-serve", action="store_true",
        help="also gliner, Ray Serve and flashdeberta for the host, in parts (.gpu/serve/)",
    )  # fmt: skip
    parser.add_argument(
        "--bench-references", action="store_true",
        help="also gliner and PyLate for the bench checkpoints' builders on the host "
        "(.gpu/bench-refs/, installed from $HOME/bench-refs/)",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    exclude = ROOT / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    if "/.gpu/" not in (exclude.read_text() if exclude.exists() else ""):
        with open(exclude, "a", encoding="utf-8") as handle:
            handle.write("/.gpu/\n")
    # the wheelhouse script is found before the long builds, not after them
    script = os.environ.get("VLLM_FACTORY_WHEELHOUSE_SCRIPT") or str(
        ROOT.parent / "shared" / "gpu" / "prepare-wheelhouse.sh"
    )
    if args.wheelhouse and not Path(script).is_file():
        parser.error(f"--wheelhouse: no {script} (set VLLM_FACTORY_WHEELHOUSE_SCRIPT)")
    build_wheels(STAGE / "dist")
    if not args.no_references:
        copy_references(reference_folders(args.python), STAGE / "artifacts")
        parts = group_folders(STAGE / "artifacts", STAGE / "artifacts-parts", args.part_mib)
        logger.info("references: %d parts of at most %d MiB", len(parts), args.part_mib)
    if args.wheelhouse:
        if (STAGE / "wheelhouse").exists():
            shutil.rmtree(STAGE / "wheelhouse")
        subprocess.run(["bash", script, str(STAGE / "wheelhouse")], check=True)
        parts = repack(STAGE / "wheelhouse", args.part_mib)
        logger.info("wheelhouse: %d parts of at most %d MiB", len(parts), args.part_mib)
    if args.gliner_serve:
        parts = stage_host_wheels(
            STAGE / "serve", gliner_serve_pins(), "serve-stage", args.part_mib
        )
        logger.info("gliner.serve: %d parts of at most %d MiB", len(parts), args.part_mib)
    if args.bench_references:
        parts = stage_host_wheels(
            STAGE / "bench-refs", bench_reference_pins(), "bench-refs", args.part_mib
        )
        logger.info("bench references: %d parts of at most %d MiB", len(parts), args.part_mib)
    sizes = subprocess.run(
        ["du", "-sh", *sorted(map(str, STAGE.iterdir()))],
        check=False,
        capture_output=True,
        text=True,
    )
    logger.info("%s", sizes.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
