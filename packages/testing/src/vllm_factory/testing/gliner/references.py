"""The GLiNER family's reference kit (serving venv side; stdlib only, so nox can build the
venv before anything is installed).

Shared by every GLiNER package: the gliner venv (``requirements-gliner.txt``), the parity
corpus (``corpus.json``: texts and label sets), the GLiNER half of the checkpoint builder
(``scripts/gliner_checkpoint.py``) and gliner's reference outputs (``scripts/gliner_encode.py``).
A package brings only ``reference/build_checkpoint.py`` (its tokenizer and random backbone)
and a three-line ``reference/<name>_reference.py``::

    from vllm_factory.testing.gliner.references import GLiNERReference
    REFERENCE = GLiNERReference(__file__)
    CORPUS, gliner_env, build_checkpoint, reference_dir = REFERENCE.exports()
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from vllm_factory.testing import lora_targets
from vllm_factory.testing.refenv import SCRIPTS, ReferenceEnv, cached_artifact

KIT = Path(__file__).resolve().parent
CORPUS = KIT / "corpus.json"
REQUIREMENTS = KIT / "requirements-gliner.txt"
ENCODE = SCRIPTS / "gliner_encode.py"
KIT_INPUTS = [REQUIREMENTS, CORPUS, SCRIPTS / "gliner_checkpoint.py", ENCODE,
              SCRIPTS / "tiny_checkpoint.py"]  # fmt: skip


def gliner_env() -> ReferenceEnv:
    """gliner 0.2.29 and its pinned stack, one cached venv for every GLiNER package."""
    return ReferenceEnv("gliner-0.2.29", [["-r", str(REQUIREMENTS)]])


PEFT_REQUIREMENTS = KIT / "requirements-gliner-peft.txt"


def gliner_peft_env() -> ReferenceEnv:
    """The gliner venv's pins plus PEFT: the LoRA suite's adapters are made and applied to
    gliner's encoder in it (``scripts/gliner_adapter.py``)."""
    return ReferenceEnv(
        "gliner-0.2.29+peft-0.21.2", [["-r", str(REQUIREMENTS)], ["-r", str(PEFT_REQUIREMENTS)]]
    )


ADAPTER = SCRIPTS / "gliner_adapter.py"
LORA_WEIGHTS = SCRIPTS / "lora_weights.py"  # the adapter script imports it
LORA_TARGETS = KIT.parent / "lora_targets.py"
HEAD_TARGET = "prompt_rep_layer.0"
# The LoRA suite's adapters on a package's tiny checkpoint (``scripts/gliner_adapter.py``
# arguments, and the encoder layers targeted, from ``lora_targets``: ``every`` projection or
# the ``attention`` inputs): PEFT on gliner's encoder, every projection at rank 4 and the
# attention inputs only at rank 8 (so that the server pads ranks); PEFT on gliner's whole
# model (names under ``token_rep_layer.bert_layer.model.``) on every projection, and one that
# also targets a head layer (``HEAD_TARGET``), which the server refuses (its head is not vLLM
# layers).
ADAPTERS: dict[str, tuple[list[str | int], str]] = {
    "lora-a": (["--seed", 1, "--rank", 4, "--alpha", 8], "every"),
    "lora-b": (["--seed", 2, "--rank", 8, "--alpha", 16], "attention"),
    "lora-whole": (["--seed", 3, "--rank", 4, "--alpha", 8, "--whole-model"], "every"),
    "lora-heads": (["--seed", 4, "--rank", 4, "--alpha", 8, "--whole-model"], "heads"),
}  # fmt: skip
# The adapters gliner's outputs are written for (served and compared).
ENCODED_ADAPTERS = ("lora-a", "lora-b", "lora-whole")
# The decoding threshold of the LoRA suite's entity lists (every decoding mode at it): an
# adapter changes the encoder only, and the parity suite covers decoding at every threshold of
# the corpus; the score tensors are compared in full.
LORA_THRESHOLDS = (0.5,)


def adapter_targets(checkpoint: Path, targets: str) -> list[str]:
    """The module names an adapter of :data:`ADAPTERS` targets on ``checkpoint`` (gliner's
    layout: the encoder's ``model_type`` in ``gliner_config.json``)."""
    config = checkpoint / "gliner_config.json"
    if targets == "heads":
        return [
            *lora_targets.encoder_layers(config, "attention", "encoder_config")[:1],
            HEAD_TARGET,
        ]
    return lora_targets.encoder_layers(config, targets, "encoder_config")


GLINKER_REQUIREMENTS = KIT / "requirements-glinker.txt"


def glinker_env() -> ReferenceEnv:
    """glinker 0.1.1 on the gliner venv's pins: the entity-linking pipelines whose model
    layers the GLiNER packages serve (``scripts/glinker_pipeline.py`` runs in it)."""
    return ReferenceEnv(
        "glinker-0.1.1", [["-r", str(REQUIREMENTS)], ["-r", str(GLINKER_REQUIREMENTS)]]
    )


class GLiNERReference:
    """One package's reference: its builder (``build_checkpoint.py`` in the folder of
    ``module_file``, the package's ``reference/``) plus the family's steps; artifacts named
    after the package."""

    CORPUS = CORPUS
    ENCODE: ClassVar[Path] = ENCODE  # gliner's reference outputs
    EXTRA_INPUTS: ClassVar[tuple[Path, ...]] = ()  # scripts of a kind's own besides the kit's
    # Builder options per checkpoint variant (``bi-encoder``: gliner's bi-encoder span model,
    # labels through their own encoder of the backbone's kind, as the GLiNER linker models have
    # it; ``bi-encoder-bert``: a small BERT label encoder of its own vocabulary instead, as the
    # gliner-bi-*-v2.0 models pair their text encoder with BGE).
    VARIANTS: ClassVar[dict[str, list[str]]] = {
        "": [],
        "bi-encoder": ["--bi-encoder"],
        "bi-encoder-bert": ["--bi-encoder", "--labels-encoder", "bert"],
    }

    # A kind's own checkpoint builder, run with the package's as ``--builder`` (its checkpoints
    # serve parity only: not calibrated); None: the package's builder alone.
    KIND_BUILDER: ClassVar[Path | None] = None

    def __init__(self, module_file: str | Path, variant: str | None = None) -> None:
        """``variant``: one of :attr:`VARIANTS` (default: the first)."""
        variant = next(iter(self.VARIANTS)) if variant is None else variant
        if variant not in self.VARIANTS:
            raise ValueError(f"unknown GLiNER checkpoint variant {variant!r}")
        self.folder = Path(module_file).resolve().parent
        self.builder = self.folder / "build_checkpoint.py"
        self.variant = variant
        suffix = f"-{variant}" if variant else ""
        self.name = self.folder.parent.name.replace("_", "-") + suffix + "-reference"

    def build_checkpoint(
        self,
        out: Path,
        size: str = "tiny",
        seed: int = 0,
        calibrate: Sequence[object] = (),
        env: ReferenceEnv | None = None,
    ) -> Path:
        """The package's checkpoint in gliner's own layout (``--size bench``: real width).
        ``calibrate``: ``--calibrate`` arguments (labels whose entity density to calibrate,
        ``--threshold``), for bench checkpoints. Made in ``env`` (default: the gliner venv)."""
        (env or gliner_env()).ensure().run(
            *self._builder(calibrate), "--out", out, "--seed", seed, "--size", size,
            *self.VARIANTS[self.variant], *calibrate,
        )  # fmt: skip
        return out

    def _builder(self, calibrate: Sequence[object]) -> list[object]:
        """The checkpoint builder's script and its own leading arguments."""
        if self.KIND_BUILDER is None:
            return [self.builder]
        if calibrate:
            raise ValueError(f"{self.variant} reference checkpoints are not calibrated")
        return [self.KIND_BUILDER, "--builder", self.builder]

    def _build(self, target: Path) -> None:
        checkpoint = self.build_checkpoint(target / "checkpoint")
        gliner_env().run(
            self.ENCODE, "--checkpoint", checkpoint, "--corpus", CORPUS,
            "--out", target / "ref-scores.npz", "--entities", target / "ref-entities.json",
            "--bf16-out", target / "ref-scores-bf16.npz",
        )  # fmt: skip

    def reference_dir(self) -> Path:
        """``<artifacts>/<package>-reference-<hash>/``: checkpoint/ (gliner layout),
        ref-scores.npz, ref-entities.json, ref-scores-bf16.npz (gliner's own bf16 run)."""
        inputs = [self.builder, *KIT_INPUTS, *self.EXTRA_INPUTS]
        return cached_artifact(self.name, inputs, self._build)

    def _build_adapters(self, target: Path) -> None:
        checkpoint = self.reference_dir() / "checkpoint"
        env = gliner_peft_env().ensure()
        corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
        assert set(LORA_THRESHOLDS) <= set(corpus["thresholds"]), corpus["thresholds"]
        lora_corpus = target / "corpus.json"
        lora_corpus.write_text(
            json.dumps({**corpus, "thresholds": list(LORA_THRESHOLDS)}, ensure_ascii=False),
            encoding="utf-8",
        )
        for name, (arguments, targets) in ADAPTERS.items():
            outputs = ["--out-scores", target / f"{name}-scores.npz",
                       "--entities", target / f"{name}-entities.json",
                       "--bf16-out-scores", target / f"{name}-scores-bf16.npz"]  # fmt: skip
            env.run(
                ADAPTER, "--checkpoint", checkpoint, "--corpus", lora_corpus, "--out", target / name,
                *(outputs if name in ENCODED_ADAPTERS else []), *arguments,
                "--targets", *adapter_targets(checkpoint, targets),
            )  # fmt: skip

    def adapters_dir(self) -> Path:
        """``<artifacts>/<package>-reference-<hash>-lora-<hash>/``: one folder per adapter of
        :data:`ADAPTERS` (PEFT's layout) on :meth:`reference_dir`'s checkpoint, and for each of
        :data:`ENCODED_ADAPTERS` gliner's outputs with it applied in process: ``<name>-scores.npz``
        and ``<name>-entities.json``, in :meth:`reference_dir`'s format, the entity lists at
        :data:`LORA_THRESHOLDS` (``corpus.json``: the corpus with those thresholds), and
        ``<name>-scores-bf16.npz``, the scores of gliner's own bf16 run with the adapter."""
        base = self.reference_dir()
        inputs = [ADAPTER, LORA_WEIGHTS, LORA_TARGETS, ENCODE, PEFT_REQUIREMENTS,
                  KIT / "references.py"]  # fmt: skip
        return cached_artifact(f"{base.name}-lora", inputs, self._build_adapters)

    def exports(self):
        """``CORPUS, gliner_env, build_checkpoint, reference_dir`` for the package module."""
        return CORPUS, gliner_env, self.build_checkpoint, self.reference_dir


def reference_dirs_of(*references: GLiNERReference) -> Callable[[], list[Path]]:
    """A package reference module's ``reference_dirs()``: the folders of all its checkpoint
    variants (the GPU check's staging builds them all)."""
    return lambda: [reference.reference_dir() for reference in references]


TOKEN_BUILDER = SCRIPTS / "gliner_token_checkpoint.py"
TOKEN_ENCODE = SCRIPTS / "gliner_token_encode.py"


class GLiNERTokenReference(GLiNERReference):
    """A package's token-level reference (``span_mode: token_level``): gliner's own
    ``UniEncoderTokenGLiNER`` on the package's tiny backbone (its ``build_checkpoint.py`` gives
    sizes, tokenizer and backbone; ``scripts/gliner_token_checkpoint.py`` the token model), and
    gliner's outputs through ``scripts/gliner_token_encode.py``: ``ref-scores.npz`` holds
    ``[words, labels, 3]`` start / end / inside scores per (label set, text)."""

    VARIANTS: ClassVar[dict[str, list[str]]] = {"token-level": []}
    ENCODE = TOKEN_ENCODE
    EXTRA_INPUTS = (TOKEN_BUILDER, TOKEN_ENCODE)
    KIND_BUILDER = TOKEN_BUILDER


RELEX_BUILDER = SCRIPTS / "gliner_relex_checkpoint.py"
RELEX_ENCODE = SCRIPTS / "gliner_relex_encode.py"


class GLiNERRelexReference(GLiNERReference):
    """A package's relex reference: gliner's own ``UniEncoderSpanRelexGLiNER`` (entities and
    relations) on the package's tiny backbone (``scripts/gliner_relex_checkpoint.py``), and
    gliner's outputs through ``scripts/gliner_relex_encode.py``: ``ref-scores.npz`` holds the
    span scores of entity-only prompts, ``ref-entities.json`` the relation cases
    (``predict_relations`` per text), ``ref-relex-bf16.json`` the same cases in bf16."""

    VARIANTS: ClassVar[dict[str, list[str]]] = {"relex": []}
    ENCODE = RELEX_ENCODE
    EXTRA_INPUTS = (TOKEN_BUILDER, TOKEN_ENCODE, RELEX_BUILDER, RELEX_ENCODE)  # they import both
    KIND_BUILDER = RELEX_BUILDER
