"""Build (once, cached) the tiny EmbeddingGemma checkpoint and sentence-transformers' outputs
for it, in the reference venv. Used by the tests; runs in the serving venv."""

from __future__ import annotations

from pathlib import Path

from vllm_factory.testing.refenv import SCRIPTS, ReferenceEnv, cached_artifact

REFERENCE = Path(__file__).resolve().parent
CORPUS = REFERENCE / "corpus.json"


def st_env() -> ReferenceEnv:
    return ReferenceEnv("embeddinggemma-st-6.2", [["-r", str(REFERENCE / "requirements-st.txt")]])


def _build(target: Path) -> None:
    checkpoint = target / "checkpoint"
    env = st_env().ensure()
    env.run(REFERENCE / "build_checkpoint.py", "--out", checkpoint, "--seed", "0")
    env.run(
        REFERENCE / "encode_reference.py", "--checkpoint", checkpoint, "--corpus", CORPUS,
        "--out", target / "ref-st.npz",
    )  # fmt: skip
    env.run(
        REFERENCE / "encode_reference.py", "--checkpoint", checkpoint, "--corpus", CORPUS,
        "--out", target / "ref-st-bf16.npz", "--dtype", "bfloat16",
    )  # fmt: skip


def reference_dir() -> Path:
    """``<artifacts>/embeddinggemma-reference-<hash>/`` with checkpoint/ and ref-st.npz."""
    inputs = sorted(REFERENCE.glob("*.py")) + sorted(REFERENCE.glob("*.txt")) + [CORPUS]
    inputs.append(SCRIPTS / "tiny_checkpoint.py")  # the builder's shared steps
    return cached_artifact("embeddinggemma-reference", inputs, _build)
