"""The ColPali family's reference kit (serving venv side; stdlib-only imports, so nox can build the
venvs before anything is installed).

Shared by every ColPali-style package (vision-language backbone + multi-vector projection,
colpali-engine's classes): the colpali-engine venv (``requirements-colpali.txt`` here, plus
the ColPali head vllm-factory-colpali from this repository for its torchvision-free image
processing), the test images (``scripts/colpali_images.py``, drawn from the corpus' image specs) and the reference
encoder (``scripts/colpali_encode.py``: fp32 and the library's own bf16 run). A package brings
its ``reference/build_checkpoint.py`` (tokenizer, tiny config, the library's classes saving
their own layout; the steps builders share in ``scripts/colpali_checkpoint.py`` and, for
Qwen3-VL backbones, ``scripts/qwen3_vl_tiny.py``), its ``corpus.json`` (queries, documents, image specs) and a short
``reference/<name>_reference.py``::

    from vllm_factory.testing.colpali.references import ColPaliReference
    REFERENCE = ColPaliReference(__file__, model_class="colpali_engine.models:ColQwen3",
                                 processor_class="colpali_engine.models:ColQwen3Processor")
    CORPUS, build_checkpoint, reference_dir = REFERENCE.exports()
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from vllm_factory.testing.refenv import SCRIPTS, ReferenceEnv, cached_artifact, staged_artifact

KIT = Path(__file__).resolve().parent
# The ColPali head's source tree (this file lies in packages/testing/src/vllm_factory/testing/colpali/
# of a checkout), which the reference venv installs.
COLPALI_HEAD = KIT.parents[4] / "heads" / "colpali"
IMAGES, ENCODE = SCRIPTS / "colpali_images.py", SCRIPTS / "colpali_encode.py"
REQUIREMENTS = KIT / "requirements-colpali.txt"
# The builders' shared steps: every builder's tokenizer texts and reload checks, and the tiny
# Qwen3-VL parts of the Qwen3-VL ones.
BUILDER_SCRIPTS = [SCRIPTS / name for name in
                   ("tiny_checkpoint.py", "colpali_checkpoint.py", "qwen3_vl_tiny.py")]  # fmt: skip
KIT_INPUTS = [REQUIREMENTS, IMAGES, ENCODE, *BUILDER_SCRIPTS]


def image_processing_file() -> Path:
    """The torchvision-free image processing both sides use, as installed here (a checkout, or
    a wheel on a GPU host that checks against artifacts built elsewhere): an input of the
    artifacts, by content. Looked up on use: this module stays importable without the head."""
    return Path(importlib.util.find_spec("vllm_factory.heads.colpali.image_processing").origin)


def colpali_env(extra: Sequence[str] = ()) -> ReferenceEnv:
    """colpali-engine 0.3.18 and its pinned stack, without torchvision (one cached venv for every
    ColPali package), plus the ColPali head vllm-factory-colpali (editable, no dependencies) for
    ``use_pil_image_processors``.

    ``extra``: further exact pins (``name==version``) installed with ``--no-deps`` on top, for a
    library built on the same stack (a fork of colpali-engine); they get a venv of their own,
    named after them, so the shared one never changes under another package's tests."""
    if not (COLPALI_HEAD / "pyproject.toml").is_file():
        raise FileNotFoundError(
            f"vllm-factory-colpali's source tree is not at {COLPALI_HEAD}: the ColPali reference "
            "venv installs it from a checkout of this repository"
        )
    steps = [["--no-deps", "-r", str(REQUIREMENTS)], ["--no-deps", "-e", str(COLPALI_HEAD)]]
    name = "colpali-engine-0.3.18"
    if extra:
        steps.append(["--no-deps", *extra])
        name += "+" + "+".join(pin.replace("==", "-") for pin in extra)
    return ReferenceEnv(name, steps)


class ColPaliReference:
    """One package's reference: its builder and corpus (in the folder of ``module_file``, the
    package's ``reference/``) plus the family's steps; artifacts named after the package.

    ``model_class`` / ``processor_class``: ``module:Name`` of the library's classes the encoder
    loads the checkpoint with; the module may also be one in the package's ``reference/`` (the
    encoder runs with that folder on ``PYTHONPATH``), for a reference the library does not ship
    as a package. ``env``: the venv the builder and the encoder run in. ``inputs``: further
    files that shape the artifacts (such a module, a kit script the builder imports), by path
    or by name in the package's ``reference/``."""

    def __init__(
        self,
        module_file: str | Path,
        model_class: str,
        processor_class: str,
        env: Callable[[], ReferenceEnv] = colpali_env,
        inputs: Sequence[str | Path] = (),
    ) -> None:
        self.folder = Path(module_file).resolve().parent
        self.inputs = [self.folder / path for path in inputs]
        self.builder = self.folder / "build_checkpoint.py"
        self.CORPUS = self.folder / "corpus.json"
        self.name = self.folder.parent.name + "-reference"
        self.model_class, self.processor_class = model_class, processor_class
        self.env = env

    def build_checkpoint(
        self, out: Path, size: str = "tiny", seed: int = 0, env: ReferenceEnv | None = None
    ) -> Path:
        """The package's checkpoint in the library's own layout (``--size``: the builder's
        sizes), made in ``env`` (default: the family's venv)."""
        (env or self.env()).ensure().run(self.builder, "--out", out, "--seed", seed, "--size", size)
        return out

    def _build(self, target: Path) -> None:
        env = self.env().ensure()
        self.build_checkpoint(target / "checkpoint", env=env)
        env.run(IMAGES, "--corpus", self.CORPUS, "--out", target / "images")
        self.encode(target, env)

    def encode(self, target: Path, env: ReferenceEnv) -> list[Path]:
        """Encode the corpus with the reference in ``env`` (fp32 ``ref-colpali.npz`` and the
        library's own bf16 run ``ref-colpali-bf16.npz``) from ``target``'s checkpoint and
        images; also how a GPU host re-encodes a reference folder built elsewhere with its own
        Python (``packages/testing/gpu/check.py --reencode``: image decoding differs between Pillow versions)."""
        written = [target / "ref-colpali.npz", target / "ref-colpali-bf16.npz"]
        env.run(
            ENCODE, "--model-class", self.model_class, "--processor-class",
            self.processor_class, "--checkpoint", target / "checkpoint", "--corpus",
            self.CORPUS, "--images", target / "images", "--out", written[0],
            "--bf16-out", written[1], env={"PYTHONPATH": self.pythonpath()},
        )  # fmt: skip
        return written

    def pythonpath(self) -> str:
        """``PYTHONPATH`` for running the library's classes: the package's ``reference/`` (a
        reference module of its own) and the kit's scripts before the caller's own path."""
        parts = [str(self.folder), str(SCRIPTS), os.environ.get("PYTHONPATH", "")]
        return os.pathsep.join(parts).rstrip(os.pathsep)

    def reference_dir(self) -> Path:
        """``<artifacts>/<package>-reference-<hash>/``: checkpoint/ (the library's layout),
        images/ (``NN.png`` and ``images.json``), ref-colpali.npz (fp32) and
        ref-colpali-bf16.npz (the library's bf16 run); layout in ``colpali_encode.py``."""
        return cached_artifact(self.name, self._artifact_inputs(), self._build)

    def staged_dir(self) -> Path | None:
        """:meth:`reference_dir` where it is complete (built here or staged from another
        machine), else None; never builds (a GPU host has no network to build with)."""
        return staged_artifact(self.name, self._artifact_inputs())

    def _artifact_inputs(self) -> list[Path]:
        return [self.builder, self.CORPUS, *KIT_INPUTS, image_processing_file(), *self.inputs]

    def exports(self) -> tuple[Path, Callable[..., Path], Callable[[], Path]]:
        """``CORPUS, build_checkpoint, reference_dir`` for the package module."""
        return self.CORPUS, self.build_checkpoint, self.reference_dir


def recorded_pillow(target: Path) -> str | None:
    """The Pillow version a reference folder's fp32 encoding recorded (``versions`` in the
    ``meta_json`` of ``ref-colpali.npz``), or None where there is none."""
    import numpy as np  # here, not at import: nox builds the venvs before numpy is installed

    path = target / "ref-colpali.npz"
    if not path.exists():
        return None
    with np.load(path) as data:
        if "meta_json" not in data.files:
            return None
        meta = json.loads(str(data["meta_json"]))
    return meta.get("versions", {}).get("pillow")


def pillow_drift(target: Path) -> tuple[str, str] | None:
    """``(recorded, installed)`` where the reference in ``target`` decoded its images with
    another Pillow than this Python's, else None. Pillow versions decode and resize some images
    differently (a 1-bit PNG of the nemotron_colembed corpus by up to 0.23 between 12.3 and
    13.0), so served vectors can only match a reference decoded by the server's own Pillow."""
    recorded = recorded_pillow(target)
    try:
        installed = metadata.version("pillow")
    except metadata.PackageNotFoundError:
        return None
    if recorded is None or recorded == installed:
        return None
    return recorded, installed
