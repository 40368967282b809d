"""The ColBERT family's reference kit (serving venv side; stdlib only, so nox can build the
venvs before anything is installed).

Shared by every ColBERT package: the PyLate and sentence-transformers venvs (their pinned
requirement files here), the PyLate half of the checkpoint builder
(``scripts/colbert_checkpoint.py``), the reference encoder (``scripts/colbert_encode.py``:
PyLate or sentence-transformers, fp32 and the library's own bf16 run), PyLate's scores
(``scripts/colbert_score.py``) and the checkpoint saved in sentence-transformers' own
multi-vector layout (``scripts/colbert_st_layout.py``). A package brings its
``reference/build_checkpoint.py`` (tokenizer and random backbone), its ``corpus.json`` and a
short ``reference/<name>_reference.py``::

    from vllm_factory.testing.colbert.references import ColBERTReference
    REFERENCE = ColBERTReference(__file__, st_layout="custom")
    CORPUS, build_checkpoint, reference_dir = REFERENCE.exports()
"""

from __future__ import annotations

from pathlib import Path

from vllm_factory.testing.refenv import SCRIPTS, ReferenceEnv, cached_artifact

KIT = Path(__file__).resolve().parent
ENCODE, SCORE, ST_LAYOUT = (SCRIPTS / f"colbert_{n}.py" for n in ("encode", "score", "st_layout"))
KIT_INPUTS = [
    *(KIT / name for name in ("requirements-pylate.txt", "pylate-nodeps.txt", "requirements-st.txt")),
    *(SCRIPTS / name for name in ("colbert_checkpoint.py", "tiny_checkpoint.py")),
    ENCODE, SCORE, ST_LAYOUT,
]  # fmt: skip


def pylate_env() -> ReferenceEnv:
    """PyLate 1.6 and its pinned stack (one cached venv for every ColBERT package)."""
    return ReferenceEnv(
        "pylate-1.6",
        [
            ["-r", str(KIT / "requirements-pylate.txt")],
            ["--no-deps", "-r", str(KIT / "pylate-nodeps.txt")],
        ],
    )


def st_env() -> ReferenceEnv:
    """sentence-transformers 6.2 (``MultiVectorEncoder``) and its pinned stack."""
    return ReferenceEnv("sentence-transformers-6.2", [["-r", str(KIT / "requirements-st.txt")]])


class ColBERTReference:
    """One package's reference: its builder and corpus (in the folder of ``module_file``, the
    package's ``reference/``) plus the family's steps; artifacts named after the package.

    ``libraries``: whose fp32 outputs on PyLate's checkpoint are references (``ref-<lib>.npz``;
    the first is the yardstick, whose own bf16 run and scores are written too).
    ``st_layout``: how ``colbert_st_layout.py`` saves the checkpoint in sentence-transformers'
    layout (``custom`` or ``native``). ``full_batches``: see ``colbert_encode.py``."""

    def __init__(
        self,
        module_file: str | Path,
        st_layout: str,
        libraries: tuple[str, ...] = ("pylate",),
        full_batches: bool = False,
    ) -> None:
        self.folder = Path(module_file).resolve().parent
        self.builder = self.folder / "build_checkpoint.py"
        self.CORPUS = self.folder / "corpus.json"
        self.name = self.folder.parent.name + "-reference"
        self.st_layout, self.libraries = st_layout, libraries
        self.encode_args = ["--full-batches"] if full_batches else []

    def build_checkpoint(
        self, out: Path, size: str = "tiny", seed: int = 0, env: ReferenceEnv | None = None
    ) -> Path:
        """The package's checkpoint in PyLate's layout (``--size``: the builder's sizes), made
        in ``env`` (default: the PyLate venv)."""
        (env or pylate_env()).ensure().run(
            self.builder, "--out", out, "--seed", seed, "--size", size
        )
        return out

    def _encode(self, env: ReferenceEnv, library: str, checkpoint: Path, out: Path, *more) -> None:
        env.run(
            ENCODE, "--library", library, "--checkpoint", checkpoint, "--corpus", self.CORPUS,
            "--out", out, *self.encode_args, *more,
        )  # fmt: skip

    def _build(self, target: Path) -> None:
        checkpoint = self.build_checkpoint(target / "checkpoint")
        envs = {"pylate": pylate_env().ensure(), "st": st_env().ensure()}
        for library in self.libraries:  # PyLate's bf16 run from the same process
            more = ["--bf16-out", target / "ref-pylate-bf16.npz"] if library == "pylate" else []
            self._encode(envs[library], library, checkpoint, target / f"ref-{library}.npz", *more)
        pylate = envs["pylate"]
        pylate.run(
            SCORE, "--vectors", target / "ref-pylate.npz", "--bf16", target / "ref-pylate-bf16.npz",
            "--out", target / "ref-pylate-scores.npz",
        )  # fmt: skip
        # The same backbone saved in sentence-transformers' own layout, and its outputs.
        layout = target / "checkpoint-st"
        envs["st"].run(
            ST_LAYOUT, "--from", checkpoint, "--out", layout, "--variant", self.st_layout
        )
        self._encode(envs["st"], "st", layout, target / "ref-st-layout.npz",
                     "--bf16-out", target / "ref-st-layout-bf16.npz")  # fmt: skip

    def reference_dir(self) -> Path:
        """``<artifacts>/<package>-reference-<hash>/``: checkpoint/ (PyLate layout),
        checkpoint-st/ (sentence-transformers layout), ref-*.npz."""
        inputs = [self.builder, self.CORPUS, *KIT_INPUTS]
        return cached_artifact(self.name, inputs, self._build)

    def exports(self):
        """``CORPUS, build_checkpoint, reference_dir`` for the package module."""
        return self.CORPUS, self.build_checkpoint, self.reference_dir
