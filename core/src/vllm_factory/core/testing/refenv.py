"""Reference libraries in their own venvs.

Reference libraries pin transformers ranges that clash with vLLM's, so each one gets a
venv of its own. It builds the tiny offline checkpoint with the library's own classes and
writes reference outputs to files; the serving venv only reads those files.

Venvs and artifacts are cached by a hash of everything that shapes them (install steps,
script sources, inputs), so a second run is instant and a changed script rebuilds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger(__name__)


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
        parts: list[str | bytes] = [sys.version]
        for step in self.install_steps:
            parts.append(" ".join(step))
            for arg in step:
                if os.path.isfile(arg):
                    parts.append(Path(arg).read_bytes())
        return _digest(parts)

    def ensure(self) -> ReferenceEnv:
        stamp = self.root / ".vllm-factory-stamp"
        fingerprint = self._fingerprint()
        if stamp.exists() and stamp.read_text() == fingerprint and self.python.exists():
            return self
        if self.root.exists():
            shutil.rmtree(self.root)
        logger.info("creating reference venv %s", self.root)
        venv.EnvBuilder(with_pip=True).create(self.root)
        for step in self.install_steps:
            subprocess.run(
                [str(self.python), "-m", "pip", "install", "-q", *step],
                check=True,
            )
        stamp.write_text(fingerprint)
        return self

    def run(self, *args: str | Path, env: dict[str, str] | None = None) -> None:
        subprocess.run(
            [str(self.python), *map(str, args)],
            check=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        )


def cached_artifact(
    name: str, inputs: Sequence[Path], build: callable, root: Path | None = None
) -> Path:
    """Directory ``<artifacts>/<name>-<hash(inputs)>`` built once by ``build(dir)``."""
    digest = _digest([p.read_bytes() for p in inputs])
    target = (root or artifacts_root()) / f"{name}-{digest}"
    done = target / ".complete"
    if done.exists():
        return target
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    build(target)
    done.write_text(json.dumps({"inputs": [str(p) for p in inputs]}))
    return target
