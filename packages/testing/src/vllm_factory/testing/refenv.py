"""Reference libraries in their own venvs.

Reference libraries pin transformers ranges that clash with vLLM's, so each one gets a
venv of its own. It builds the tiny offline checkpoint with the library's own classes and
writes reference outputs to files; the serving venv only reads those files.

Venvs and artifacts are cached by a hash of everything that shapes them (install steps,
script sources, inputs), so a second run is instant and a changed script rebuilds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from vllm_factory.testing import pipconfig

logger = logging.getLogger(__name__)
# Scripts the reference venvs run (checkpoint builders' shared steps, reference encoders, the
# in-process baseline): plain files, stdlib plus the reference library, on ``PYTHONPATH`` in
# :meth:`ReferenceEnv.run` so that a package's own script can import them.
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def artifacts_root() -> Path:
    """``$VLLM_FACTORY_ARTIFACTS`` or ``.artifacts/`` at the repository root."""
    env = os.environ.get("VLLM_FACTORY_ARTIFACTS")
    if env:
        return Path(env)
    here = Path.cwd().resolve()
    for parent in (here, *here.parents):
        if (parent / "noxfile.py").exists():
            return parent / ".artifacts"
    return here / ".artifacts"


def _digest(parts: Sequence[str | bytes]) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part.encode() if isinstance(part, str) else part)
        sha.update(b"\0")
    return sha.hexdigest()[:16]


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold ``<path>.lock``: nox sessions running side by side (CI runs several) build each
    venv and artifact once, the later one waiting for the first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class ReferenceEnv:
    """A venv defined by pip install steps, e.g. ``[["-r", "req.txt"], ["--no-deps", "x"]]``."""

    def __init__(self, name: str, install_steps: Sequence[Sequence[str]], root: Path | None = None):
        self.name = name
        self.install_steps = [list(step) for step in install_steps]
        self.root = (root or artifacts_root()) / "venvs" / name

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def _fingerprint(self) -> str:
        # Files count by name and content, not by where they lie: moving a requirements file
        # within the repository (or cloning it elsewhere) keeps the cached venv.
        parts: list[str | bytes] = [sys.version]
        for step in self.install_steps:
            parts.append(" ".join(Path(a).name if os.path.isfile(a) else a for a in step))
            parts += [Path(a).read_bytes() for a in step if os.path.isfile(a)]
        return _digest(parts)

    def ensure(self) -> ReferenceEnv:
        with _exclusive(self.root):
            return self._ensure()

    def _ensure(self) -> ReferenceEnv:
        stamp = self.root / ".vllm-factory-stamp"
        fingerprint = self._fingerprint()
        if stamp.exists() and stamp.read_text() == fingerprint and self.python.exists():
            return self
        if self.root.exists():
            shutil.rmtree(self.root)
        installer = pipconfig.uv()
        logger.info("creating reference venv %s (%s)", self.root, "uv" if installer else "pip")
        if installer:  # pip took minutes per venv on CI hosts (it keeps no HTTP cache there)
            env = {**os.environ, **pipconfig.pip_settings_for_uv()}
            subprocess.run([installer, "venv", "-q", "--python", sys.executable, str(self.root)],
                           check=True)  # fmt: skip
            install = [installer, "pip", "install", "-q", "--python", str(self.python)]
        else:
            env = None
            venv.EnvBuilder(with_pip=True).create(self.root)
            install = [str(self.python), "-m", "pip", "install", "-q"]
        for step in self.install_steps:
            subprocess.run([*install, *step], check=True, env=env)
        stamp.write_text(fingerprint)
        return self

    def run(self, *args: str | Path | int, env: dict[str, str] | None = None) -> None:
        """``python ARGS`` in this venv, offline, with :data:`SCRIPTS` importable."""
        subprocess.run([str(self.python), *map(str, args)], check=True, env=script_env(env))


class GivenPython(ReferenceEnv):
    """A reference interpreter given by path (``--ref-python``: a venv made elsewhere, or a
    wrapper on an offline GPU host), used as a :class:`ReferenceEnv` is but never built."""

    def __init__(self, python: str | Path) -> None:
        super().__init__(Path(python).name, [])
        self._python = Path(python)

    @property
    def python(self) -> Path:
        return self._python

    def ensure(self) -> GivenPython:
        return self


def script_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment reference scripts run in: offline, :data:`SCRIPTS` on ``PYTHONPATH``."""
    path = os.pathsep.join(filter(None, [str(SCRIPTS), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path, **(extra or {})}


def package_reference(package: Path) -> Any:
    """``REFERENCE`` of the package's own ``reference/<name>_reference.py`` (its family kit's
    reference object, e.g. a ``ColBERTReference``)."""
    path = package / "reference" / f"{package.name}_reference.py"
    spec = importlib.util.spec_from_file_location(f"{package.name}_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.REFERENCE


def adapter_dirs_of(reference: Any) -> Callable[[], list[Path]]:
    """A package reference module's ``adapter_dirs()``: its LoRA suite's adapters folder
    (``reference.adapters_dir()``), which the GPU check's staging builds beside the reference
    folders."""
    return lambda: [reference.adapters_dir()]


def artifact_dir(name: str, inputs: Sequence[Path], root: Path | None = None) -> Path:
    """Where :func:`cached_artifact` keeps ``name`` built from ``inputs`` (built or not)."""
    digest = _digest([p.read_bytes() for p in inputs])
    return (root or artifacts_root()) / f"{name}-{digest}"


def staged_artifact(name: str, inputs: Sequence[Path], root: Path | None = None) -> Path | None:
    """:func:`cached_artifact`'s directory where it is complete (built here or staged from
    another machine), else None; never builds."""
    target = artifact_dir(name, inputs, root)
    return target if (target / ".complete").exists() else None


def cached_artifact(
    name: str, inputs: Sequence[Path], build: callable, root: Path | None = None
) -> Path:
    """Directory ``<artifacts>/<name>-<hash(inputs)>`` built once by ``build(dir)``."""
    target = artifact_dir(name, inputs, root)
    done = target / ".complete"
    if done.exists():
        return target
    with _exclusive(target):
        if done.exists():  # built meanwhile by another process
            return target
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        build(target)
        done.write_text(json.dumps({"inputs": [str(p) for p in inputs]}))
    return target
