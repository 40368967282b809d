"""The GLiNER2 reference kit (serving venv side; stdlib only, so nox can build the venv before
anything is installed).

The gliner2 venv (``requirements-gliner2.txt``), the parity cases (``cases.json``: id, text and
the request ``data`` a client sends, minus the text), the GLiNER2 half of the checkpoint
builder (``scripts/gliner2_checkpoint.py``: gliner2's model on the package's random backbone,
heads calibrated), the DeBERTa-v3 backbone (``scripts/deberta_checkpoint.py``) and gliner2's
reference outputs (``scripts/gliner2_encode.py``). A package brings
``reference/build_checkpoint.py`` (its tokenizer and random backbone) and a
``reference/<name>_reference.py`` of three lines, as the GLiNER kit's: ``CASES, gliner2_env,
build_checkpoint, reference_dir = GLiNER2Reference(__file__).exports()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vllm_factory.testing import lora_targets
from vllm_factory.testing.refenv import SCRIPTS, ReferenceEnv, cached_artifact

KIT = Path(__file__).resolve().parent
CASES = KIT / "cases.json"
REQUIREMENTS = KIT / "requirements-gliner2.txt"
ENCODE = SCRIPTS / "gliner2_encode.py"
ADAPTER = SCRIPTS / "gliner2_adapter.py"
LORA_WEIGHTS = SCRIPTS / "lora_weights.py"  # the adapter script imports it
LORA_TARGETS = KIT.parent / "lora_targets.py"
# The LoRA adapters of the LoRA suite (``scripts/gliner2_adapter.py`` arguments, and the
# encoder layers targeted, from ``lora_targets``: ``every`` projection or the ``attention``
# inputs, as gliner2's ``encoder.<name>`` target groups), made with gliner2's own API on the
# package's tiny checkpoint: two on the encoder (every projection at rank 4, what gliner2's
# ``encoder`` group adapts on DeBERTa; the attention inputs only at rank 8, so that the server
# pads ranks), and one that also targets the classification head, which the server refuses
# (its heads are not vLLM layers). ``lora-a`` is also saved in gliner2's legacy layout
# (``lora-a-legacy``), which the server serves once ``vllm-factory-prep`` has converted it.
ADAPTERS: dict[str, tuple[list[str | int], str]] = {
    "lora-a": (["--seed", 1, "--rank", 4, "--alpha", 8, "--legacy-out", "lora-a-legacy"],
               "every"),
    "lora-b": (["--seed", 2, "--rank", 8, "--alpha", 16], "attention"),
    "lora-heads": (["--seed", 3, "--rank", 4, "--alpha", 8], "heads"),
}  # fmt: skip
ENCODED_ADAPTERS = ("lora-a", "lora-b", "lora-a-legacy")
# gliner2's legacy layout saves target groups (``encoder``), which its ``load_adapter``
# resolves by name patterns (query / key / value / dense) that match no ModernBERT layer:
# gliner2 cannot load back a legacy adapter of such an encoder, so ``lora-a-legacy`` is made
# only for these encoders.
LEGACY_ENCODERS = ("deberta-v2",)
# The library's runs of the cases, by file suffix: fp32 (the reference), bf16 (what bf16 costs
# the library itself: the yardstick of a bf16 server) and float64 (its fp32 noise).
RUNS = (("", "float32"), ("-bf16", "bfloat16"), ("-fp64", "float64"))
KIT_INPUTS = [REQUIREMENTS, CASES, ENCODE, SCRIPTS / "gliner2_checkpoint.py",
              SCRIPTS / "deberta_checkpoint.py", SCRIPTS / "tiny_checkpoint.py"]  # fmt: skip


def adapter_targets(checkpoint: Path, targets: str) -> list[str]:
    """gliner2's target groups for an adapter of :data:`ADAPTERS` on ``checkpoint`` (the
    encoder's ``model_type`` in ``encoder_config/config.json``)."""
    config = checkpoint / "encoder_config" / "config.json"
    role = "every" if targets == "heads" else targets
    groups = [f"encoder.{name}" for name in lora_targets.encoder_layers(config, role)]
    return [*groups, "classification_head"] if targets == "heads" else groups


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
        for suffix, dtype in RUNS:
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

    def _build_adapters(self, target: Path) -> None:
        checkpoint = self.reference_dir() / "checkpoint"
        env = gliner2_env().ensure()
        kind = lora_targets.model_type(checkpoint / "encoder_config" / "config.json")
        for name, (arguments, targets) in ADAPTERS.items():
            if kind not in LEGACY_ENCODERS and "--legacy-out" in arguments:
                at = arguments.index("--legacy-out")
                arguments = arguments[:at] + arguments[at + 2 :]
            arguments = [target / a if a == f"{name}-legacy" else a for a in arguments]
            env.run(
                ADAPTER, "--checkpoint", checkpoint, "--out", target / name, *arguments,
                "--targets", *adapter_targets(checkpoint, targets),
            )  # fmt: skip
        for name in (name for name in ENCODED_ADAPTERS if (target / name).is_dir()):
            for suffix, dtype in RUNS:
                env.run(
                    ENCODE, "--checkpoint", checkpoint, "--cases", CASES,
                    "--adapter", target / name, "--dtype", dtype,
                    "--out-results", target / f"{name}-results{suffix}.json",
                    "--out-scores", target / f"{name}-scores{suffix}.npz",
                )  # fmt: skip

    def adapters_dir(self) -> Path:
        """``<artifacts>/<package>-reference-<hash>-lora-<hash>/``: one folder per adapter of
        :data:`ADAPTERS` (PEFT's layout, as gliner2 saves it; ``lora-a-legacy`` gliner2's
        legacy layout, for :data:`LEGACY_ENCODERS` only) on :meth:`reference_dir`'s checkpoint, and for each of :data:`ENCODED_ADAPTERS` made gliner2's runs of the cases with
        ``load_adapter`` (``<name>-results.json`` + ``<name>-scores.npz`` in float32,
        ``-bf16`` in bfloat16, ``-fp64`` in float64), in :meth:`reference_dir`'s format."""
        base = self.reference_dir()
        return cached_artifact(
            f"{base.name}-lora",
            [ADAPTER, LORA_WEIGHTS, LORA_TARGETS, ENCODE, KIT / "references.py"],
            self._build_adapters,
        )

    def exports(self):
        """``CASES, gliner2_env, build_checkpoint, reference_dir`` for the package module."""
        return CASES, gliner2_env, self.build_checkpoint, self.reference_dir
