"""Build (once, cached) the tiny checkpoint and the PyLate reference outputs in PyLate's own
venv. Used by the tests and the benchmarks; runs in the serving venv.

PyLate 1.6.0 with transformers 5.3.0 has LFM2 (``Lfm2Model``), so this package uses the very
same PyLate venv as moderncolbert: same name, same install steps (moderncolbert's pinned
requirement files), hence one cached venv for both.
"""

from __future__ import annotations

from pathlib import Path

from vllm_factory.core.testing.refenv import ReferenceEnv, cached_artifact

REFERENCE = Path(__file__).resolve().parent
CORPUS = REFERENCE / "corpus.json"
PYLATE_PINS = REFERENCE.parents[1] / "moderncolbert" / "reference"


def pylate_env() -> ReferenceEnv:
    return ReferenceEnv(
        "pylate-1.6",
        [
            ["-r", str(PYLATE_PINS / "requirements-pylate.txt")],
            ["--no-deps", "-r", str(PYLATE_PINS / "pylate-nodeps.txt")],
        ],
    )


def st_env() -> ReferenceEnv:
    """moderncolbert's sentence-transformers venv (same name and pins: one cached venv)."""
    return ReferenceEnv(
        "sentence-transformers-6.2", [["-r", str(PYLATE_PINS / "requirements-st.txt")]]
    )


def build_checkpoint(target: Path, size: str = "tiny", seed: int = 0) -> Path:
    pylate_env().ensure().run(
        REFERENCE / "build_checkpoint.py", "--out", target, "--seed", str(seed), "--size", size
    )
    return target


def _build(target: Path) -> None:
    from vllm_factory.heads.colbert.testing.references import build_st_layout

    checkpoint = build_checkpoint(target / "checkpoint")
    pylate_env().ensure().run(
        REFERENCE / "encode_reference.py", "--library", "pylate", "--checkpoint", checkpoint,
        "--corpus", CORPUS, "--out", target / "ref-pylate.npz",
    )  # fmt: skip
    # PyLate's own bf16 run (the yardstick of a bf16 server), with moderncolbert's encoder.
    pylate_env().run(
        PYLATE_PINS / "encode_reference.py", "--library", "pylate", "--checkpoint", checkpoint,
        "--corpus", CORPUS, "--out", target / "ref-pylate-bf16.npz", "--dtype", "bfloat16",
    )  # fmt: skip
    pylate_env().run(
        PYLATE_PINS / "score_reference.py", "--vectors", target / "ref-pylate.npz",
        "--bf16", target / "ref-pylate-bf16.npz", "--out", target / "ref-pylate-scores.npz",
    )  # fmt: skip
    # The same backbone saved in sentence-transformers' own layout, and its outputs.
    build_st_layout(st_env().ensure(), PYLATE_PINS, checkpoint, target, CORPUS, "native")


def reference_dir() -> Path:
    """``<artifacts>/lfm2_colbert-reference-<hash>/`` with checkpoint/ and ref-pylate.npz."""
    from vllm_factory.heads.colbert.testing import references  # hashed: it builds a part

    inputs = sorted(REFERENCE.glob("*.py")) + [CORPUS, PYLATE_PINS / "requirements-pylate.txt"]
    inputs += [
        PYLATE_PINS / name
        for name in ("encode_reference.py", "score_reference.py", "build_st_checkpoint.py")
    ]
    inputs.append(Path(references.__file__))
    return cached_artifact("lfm2_colbert-reference", inputs, _build)
