"""Build (once, cached) the tiny checkpoint and the reference outputs, each library in its
own venv. Used by the tests, the demo and the benchmarks; runs in the serving venv."""

from __future__ import annotations

from pathlib import Path

from vllm_factory.core.testing.refenv import ReferenceEnv, cached_artifact

REFERENCE = Path(__file__).resolve().parent
CORPUS = REFERENCE / "corpus.json"


def pylate_env() -> ReferenceEnv:
    return ReferenceEnv(
        "pylate-1.6",
        [
            ["-r", str(REFERENCE / "requirements-pylate.txt")],
            ["--no-deps", "-r", str(REFERENCE / "pylate-nodeps.txt")],
        ],
    )


def st_env() -> ReferenceEnv:
    return ReferenceEnv(
        "sentence-transformers-6.2", [["-r", str(REFERENCE / "requirements-st.txt")]]
    )


def _build(target: Path) -> None:
    from vllm_factory.heads.colbert.testing.references import build_st_layout

    checkpoint = target / "checkpoint"
    pylate = pylate_env().ensure()
    pylate.run(REFERENCE / "build_checkpoint.py", "--out", checkpoint, "--seed", "0")
    for library, env in (("pylate", pylate), ("st", st_env().ensure())):
        env.run(
            REFERENCE / "encode_reference.py", "--library", library, "--checkpoint", checkpoint,
            "--corpus", CORPUS, "--out", target / f"ref-{library}.npz",
        )  # fmt: skip
    pylate.run(
        REFERENCE / "encode_reference.py", "--library", "pylate", "--checkpoint", checkpoint,
        "--corpus", CORPUS, "--out", target / "ref-pylate-bf16.npz", "--dtype", "bfloat16",
    )  # fmt: skip
    pylate.run(
        REFERENCE / "score_reference.py", "--vectors", target / "ref-pylate.npz",
        "--bf16", target / "ref-pylate-bf16.npz", "--out", target / "ref-pylate-scores.npz",
    )  # fmt: skip
    # The same backbone saved in sentence-transformers' own layout, and its outputs.
    build_st_layout(st_env().ensure(), REFERENCE, checkpoint, target, CORPUS, "custom")


def reference_dir() -> Path:
    """``<artifacts>/moderncolbert-reference-<hash>/`` with checkpoint/ and ref-*.npz."""
    from vllm_factory.heads.colbert.testing import references  # hashed: it builds a part

    inputs = sorted(REFERENCE.glob("*.py")) + sorted(REFERENCE.glob("*.txt")) + [CORPUS]
    inputs.append(Path(references.__file__))
    return cached_artifact("moderncolbert-reference", inputs, _build)
