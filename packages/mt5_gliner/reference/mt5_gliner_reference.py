"""Build (once, cached) the tiny mT5 GLiNER checkpoint and the gliner reference outputs,
the library in its own venv. Used by tests and benchmarks (serving venv).

The gliner venv, corpus, reference encoder and the GLiNER half of the checkpoint builder
are mmbert_gliner's (packages/mmbert_gliner/reference); only the backbone differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vllm_factory.core.testing.refenv import cached_artifact

REFERENCE = Path(__file__).resolve().parent
SHARED = REFERENCE.parents[1] / "mmbert_gliner" / "reference"
sys.path.insert(0, str(SHARED))
from mmbert_gliner_reference import CORPUS, gliner_env

__all__ = ["CORPUS", "build_checkpoint", "gliner_env", "reference_dir"]


def build_checkpoint(out: Path, size: str = "tiny", seed: int = 0) -> Path:
    env = gliner_env().ensure()
    env.run(REFERENCE / "build_checkpoint.py", "--out", out, "--seed", seed, "--size", size)
    return out


def _build(target: Path) -> None:
    checkpoint = build_checkpoint(target / "checkpoint")
    for out, more in (("ref-scores.npz", ["--entities", target / "ref-entities.json"]),
                      ("ref-scores-bf16.npz", ["--dtype", "bfloat16"])):  # fmt: skip
        gliner_env().run(
            SHARED / "encode_reference.py", "--checkpoint", checkpoint, "--corpus", CORPUS,
            "--out", target / out, *more,
        )  # fmt: skip


def reference_dir() -> Path:
    """``<artifacts>/mt5-gliner-reference-<hash>/``: checkpoint/ (gliner layout),
    ref-scores.npz, ref-entities.json."""
    inputs = [
        *sorted(REFERENCE.glob("*.py")),
        *sorted(SHARED.glob("*.py")),
        *sorted(SHARED.glob("*.txt")),
        CORPUS,
    ]
    return cached_artifact("mt5-gliner-reference", inputs, _build)
