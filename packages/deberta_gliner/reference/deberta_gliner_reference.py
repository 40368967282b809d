"""Build (once, cached) the tiny DeBERTa-v3 GLiNER checkpoint and the gliner reference
outputs, in the gliner venv. Used by tests and benchmarks (serving venv).

Shared with mmbert_gliner: the gliner venv (same requirements file, so the same cached venv),
the corpus, ``encode_reference.py`` and the gliner assembly step of the checkpoint builder."""

from __future__ import annotations

import sys
from pathlib import Path

from vllm_factory.core.testing.refenv import ReferenceEnv, cached_artifact

REFERENCE = Path(__file__).resolve().parent
SHARED = REFERENCE.parents[1] / "mmbert_gliner" / "reference"
CORPUS = SHARED / "corpus.json"
BUILDER = REFERENCE / "build_checkpoint.py"


def gliner_env() -> ReferenceEnv:
    sys.path.insert(0, str(SHARED))
    try:
        import mmbert_gliner_reference
    finally:
        sys.path.remove(str(SHARED))
    return mmbert_gliner_reference.gliner_env()


def _build(target: Path) -> None:
    env = gliner_env().ensure()
    checkpoint = target / "checkpoint"
    env.run(BUILDER, "--out", checkpoint, "--seed", "0")
    env.run(
        SHARED / "encode_reference.py", "--checkpoint", checkpoint, "--corpus", CORPUS,
        "--out", target / "ref-scores.npz", "--entities", target / "ref-entities.json",
    )  # fmt: skip
    env.run(
        SHARED / "encode_reference.py", "--checkpoint", checkpoint, "--corpus", CORPUS,
        "--out", target / "ref-scores-bf16.npz", "--dtype", "bfloat16",
    )  # fmt: skip


def reference_dir() -> Path:
    """``<artifacts>/deberta-gliner-reference-<hash>/``: checkpoint/ (gliner layout),
    ref-scores.npz, ref-entities.json."""
    inputs = [BUILDER, *sorted(SHARED.glob("*.py")), *sorted(SHARED.glob("*.txt")), CORPUS]
    return cached_artifact("deberta-gliner-reference", inputs, _build)
