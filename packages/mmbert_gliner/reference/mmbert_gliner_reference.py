"""Build (once, cached) the tiny GLiNER checkpoint, its vLLM-ready prepared copy and the
reference outputs, the library in its own venv. Used by tests and benchmarks (serving venv)."""

from __future__ import annotations

from pathlib import Path

from vllm_factory.core.testing.refenv import ReferenceEnv, cached_artifact

REFERENCE = Path(__file__).resolve().parent
CORPUS = REFERENCE / "corpus.json"


def gliner_env() -> ReferenceEnv:
    return ReferenceEnv("gliner-0.2.29", [["-r", str(REFERENCE / "requirements-gliner.txt")]])


def _build(target: Path) -> None:
    env = gliner_env().ensure()
    checkpoint = target / "checkpoint"
    env.run(REFERENCE / "build_checkpoint.py", "--out", checkpoint, "--seed", "0")
    env.run(
        REFERENCE / "encode_reference.py", "--checkpoint", checkpoint, "--corpus", CORPUS,
        "--out", target / "ref-scores.npz", "--entities", target / "ref-entities.json",
    )  # fmt: skip

    env.run(
        REFERENCE / "encode_reference.py", "--checkpoint", checkpoint, "--corpus", CORPUS,
        "--out", target / "ref-scores-bf16.npz", "--dtype", "bfloat16",
    )  # fmt: skip


def reference_dir() -> Path:
    """``<artifacts>/mmbert-gliner-reference-<hash>/``: checkpoint/ (gliner layout),
    ref-scores.npz, ref-entities.json, ref-scores-bf16.npz (gliner's own bf16 run)."""
    inputs = sorted(REFERENCE.glob("*.py")) + sorted(REFERENCE.glob("*.txt")) + [CORPUS]
    return cached_artifact("mmbert-gliner-reference", inputs, _build)
