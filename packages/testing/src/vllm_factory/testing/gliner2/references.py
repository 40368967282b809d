"""The GLiNER2 reference kit (serving venv side; stdlib only, so nox can build the venv before
anything is installed).

The gliner2 venv (``requirements-gliner2.txt``), the parity cases (``cases.json``: id, text and
the request ``data`` a client sends, minus the text), the GLiNER2 half of the checkpoint
builder (``scripts/gliner2_checkpoint.py``: gliner2's model on the package's random backbone,
heads calibrated), the DeBERTa-v3 backbone (``scripts/deberta_checkpoint.py``) and gliner2's
reference outputs (``scripts/gliner2_encode.py``). A package brings
``reference/build_checkpoint.py`` (its tokenizer and random backbone) and a three-line
``reference/<name>_reference.py``::

    from vllm_factory.testing.gliner2.references import GLiNER2Reference
    REFERENCE = GLiNER2Reference(__file__)
    CASES, gliner2_env, build_checkpoint, reference_dir = REFERENCE.exports()
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vllm_factory.testing.refenv import SCRIPTS, ReferenceEnv, cached_artifact

KIT = Path(__file__).resolve().parent
CASES = KIT / "cases.json"
REQUIREMENTS = KIT / "requirements-gliner2.txt"
ENCODE = SCRIPTS / "gliner2_encode.py"
KIT_INPUTS = [REQUIREMENTS, CASES, ENCODE, SCRIPTS / "gliner2_checkpoint.py",
              SCRIPTS / "deberta_checkpoint.py", SCRIPTS / "tiny_checkpoint.py"]  # fmt: skip


def gliner2_env() -> ReferenceEnv:
    """gliner2 2.1.0 and its pinned stack, one cached venv for every GLiNER2 package."""
    return ReferenceEnv("gliner2-2.1.0", [["-r", str(REQUIREMENTS)]])


class GLiNER2Reference:
    """One package's reference: its builder (``build_checkpoint.py`` in the folder of
    ``module_file``, the package's ``reference/``) plus the kit's steps; artifacts named after
    the package."""

    CASES = CASES

    def __init__(self, module_file: str | Path) -> None:
        self.folder = Path(module_file).resolve().parent
        self.builder = self.folder / "build_checkpoint.py"
        self.name = self.folder.parent.name.replace("_", "-") + "-reference"

    def build_checkpoint(
        self,
        out: Path,
        size: str = "tiny",
        seed: int = 0,
        env: ReferenceEnv | None = None,
        report: Path | None = None,
        calibrate: Sequence[object] = (),
    ) -> Path:
        """The package's checkpoint in gliner2's own ``save_pretrained`` layout (``size``
        ``bench``: real width), made in ``env`` (default: the gliner2 venv); the calibration
        figures go to ``report``. ``calibrate``: more builder arguments (bench checkpoints:
        ``--calibration-texts FILE --calibration-schema JSON``)."""
        more = ["--report", report] if report is not None else []
        more += list(calibrate)
        (env or gliner2_env()).ensure().run(
            self.builder, "--out", out, "--seed", seed, "--size", size, *more
        )
        return out

    def _build(self, target: Path) -> None:
        checkpoint = self.build_checkpoint(
            target / "checkpoint", report=target / "calibration.json"
        )
        for suffix, dtype in (("", "float32"), ("-bf16", "bfloat16"), ("-fp64", "float64")):
            gliner2_env().run(
                ENCODE, "--checkpoint", checkpoint, "--cases", CASES,
                "--out-results", target / f"ref-results{suffix}.json",
                "--out-scores", target / f"ref-scores{suffix}.npz", "--dtype", dtype,
            )  # fmt: skip

    def reference_dir(self) -> Path:
        """``<artifacts>/<package>-reference-<hash>/``: checkpoint/ (gliner2's layout),
        calibration.json, ref-results.json + ref-scores.npz (gliner2's fp32 run of the cases),
        ref-results-bf16.json + ref-scores-bf16.npz (its bf16 run of the same cases),
        ref-results-fp64.json + ref-scores-fp64.npz (its float64 run: how far float32 rounding
        alone moves this checkpoint's scores)."""
        return cached_artifact(self.name, [self.builder, *KIT_INPUTS], self._build)

    def exports(self):
        """``CASES, gliner2_env, build_checkpoint, reference_dir`` for the package module."""
        return CASES, gliner2_env, self.build_checkpoint, self.reference_dir
