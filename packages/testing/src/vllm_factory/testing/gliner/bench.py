"""The GLiNER family's benchmark spec: every GLiNER package's ``benchmarks/bench_spec.py`` is
``SPEC = GLiNERBenchSpec(__file__)`` (``nox -s bench -- --plugin NAME``).

- Checkpoint: the package's random gliner model of real width (its
  ``reference/build_checkpoint.py --size bench``), its scores lowered so that gliner finds
  about one entity per 10 words at the bench threshold, as a trained model does
  (``--calibrate``, on texts of the run's length mix; the figures are in the report), built
  once per mix with gliner in its venv, then run through ``vllm-factory-prep``; cached under
  ``.artifacts/<package>-bench/``. Both the
  plugin and gliner load the prepared directory (it keeps gliner_config.json, weights and
  tokenizer as gliner saved them).
- Requests: one text per ``POST /pooling``, ``{"text": T, "labels": LABELS, "threshold":
  0.5}`` with the 5 labels below. No native vLLM model exists.
- Peer: gliner's own server, ``python -m gliner.serve`` (Ray Serve), on the same checkpoint,
  texts, labels and threshold (``POST /gliner``), after the plugin
  (:mod:`vllm_factory.testing.gliner.gliner_serve`; ``--only plugin`` leaves it out).
- Reference: ``GLiNER.inference`` on the same texts and labels (the shared in-process
  baseline, ``--library gliner``) at batch size 1 and the batch-size sweep; the report gives
  batch size 1 and the best one.
- Token counts (corpus lengths, tokens/s): the text's own tokens, i.e. the full gliner prompt
  (``[CLS] <<ENT>> person ... <<SEP>> words [SEP]``) minus its fixed part (special tokens and
  the 5-label prompt, the same for every request).
- ``--workload long``: documents of thousands of words (:func:`~vllm_factory.testing.bench.
  build_documents`; the checkpoint calibrated as for the default mix), one per request with
  ``long_text: "window"`` (the plugin's default overlap), against gliner in process reading
  the same windows and merging them as the kit's long reference does
  (``scripts/long_baseline.py --library gliner``); no gliner.serve (it reads a text's first
  ``max_len`` words only). Token counts are then summed over each document's windows (each
  window's text tokens, at most what the tokenizer keeps).
- ``--workload lora`` (packages that serve LoRA: ``GLiNERBenchSpec(__file__, lora=True)``):
  the default texts, request ``i`` naming adapter ``a<i % n>`` of ``--adapters`` n seeded
  adapters (:func:`bench_adapters`: the kit's ``scripts/gliner_adapter.py``, PEFT on gliner's
  encoder, rank ``--lora-rank`` on every linear layer of it), served three ways: ``base``, the
  plugin without LoRA on the same checkpoint (the base model alone: what the issue's ratio is
  taken against, and what a server without adapters costs); ``plugin``, the plugin with
  vLLM's LoRA and every adapter from start-up; ``gliner-serve``, gliner.serve with PolyLoRA on
  the same adapter folders (``adapter_id`` per request, no ``torch.compile``: its precompile
  does not run adapters). gliner 0.2.29 loads the adapters into PolyLoRA but its
  ``run_batch`` does not hand ``adapter_ids`` on to the wrapped encoder (checked on CPU,
  2026-12-05: an adapter id's scores equal the base model's, the wrapped encoder called
  directly with it moves them by up to 0.97), so that row is the base model's cost behind
  PolyLoRA's layers, not the adapters' (its outputs in the report equal the base model's). No
  in-process baseline (gliner applies one PEFT adapter per model).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from vllm_factory.testing import flops, lora_targets
from vllm_factory.testing.bench import (
    LONG,
    LORA,
    SHORT,
    SHORT_RANGE,
    BenchConfig,
    ServerSpec,
    TextBenchSpec,
    adapter_names,
    bench_artifacts,
    lora_args,
    windowed_body,
)
from vllm_factory.testing.gliner.gliner_serve import (
    ROUTE,
    GlinerServe,
    check_answer,
    gliner_polylora_env,
    gliner_serve_env,
    polylora_args,
    serve_body,
    write_polylora_manifest,
)
from vllm_factory.testing.gliner.references import (
    ADAPTER,
    CORPUS,
    KIT_INPUTS,
    LORA_WEIGHTS,
    GLiNERReference,
    gliner_env,
    gliner_peft_env,
)
from vllm_factory.testing.refenv import cached_artifact

LABELS = ["person", "organization", "location", "date", "product"]
THRESHOLD = 0.5
SEED = 0
CALIBRATION_TEXTS = 160
"""The checkpoint builder levels the texts' score offsets on the first 128 and calibrates the
density on the other 32 (texts it has not fitted, as the bench's are): one calibration on 8
texts swung by 2x between sets of texts and left 115 of 128 bench texts without entities."""
WORDS_PER_TOKEN = 0.55
"""Text words per model token of the bench's texts (0.49 - 0.54 measured on the DeBERTa and
ModernBERT bench tokenizers), to size calibration texts before the tokenizer exists."""
MIXED_WORDS = (16, 24, 90, 90, 90, 360, 360, 360)
ADAPTER_SEED = 1
"""Adapter ``a<i>`` is drawn with seed ``ADAPTER_SEED + i``."""
LORA_ALPHA_PER_RANK = 0.25
"""The bench adapters' ``lora_alpha`` over their rank. The kit's factors (``lora_A`` rows of
unit norm over the input, ``lora_B`` ~ N(0, 0.05^2)) are full size at any alpha; the scale only
sets how far the outputs move, kept small so that an adapter's answers stay about as dense as
the calibrated base model's (the report's outputs per server show it)."""


def calibration_words(lengths: dict[str, float], rng: random.Random) -> list[int]:
    """Word counts of :data:`CALIBRATION_TEXTS` calibration texts in the run's length mix (at
    least one per bucket). A random model's entity density depends on text length (one bench
    checkpoint, calibrated to 0.097 entities per word on the mixed texts, found 0.41 on short
    and 128-token texts), so the checkpoint is calibrated on texts like the run's own."""
    total = sum(lengths.values())
    counts = []
    for name in sorted(lengths, key=lambda n: (n != SHORT, int(n) if n.isdigit() else 0)):
        for _ in range(max(1, round(CALIBRATION_TEXTS * lengths[name] / total))):
            tokens = rng.randint(*SHORT_RANGE) if name == SHORT else int(name)
            counts.append(max(4, round(tokens * WORDS_PER_TOKEN)))
    return counts


def plugin_body(model: str, text: str, encoding: str) -> dict:
    return {"model": model, "data": {"text": text, "labels": LABELS, "threshold": THRESHOLD}}


# :func:`plugin_body` read whole in windows (the default overlap)
long_plugin_body = windowed_body(plugin_body)


def describe_entities(bodies: list[dict], answers: list[dict]) -> dict:
    """Entities per word of the plugin's answers (a trained model finds about one per 5 - 15
    words; the bench checkpoint is calibrated to that)."""
    texts = [body["data"]["text"] for body in bodies]
    return _density(texts, [len(answer["data"]) for answer in answers])  # one text each


def describe_serve_entities(bodies: list[dict], answers: list[dict]) -> dict:
    """:func:`describe_entities` for gliner.serve's answers."""
    return _density([b["text"] for b in bodies], [len(a["entities"]) for a in answers])


def _density(texts: list[str], found: list[int]) -> dict:
    """Entities per word over ``texts``, and how they spread over the texts: a trained model
    finds some in nearly every text, while a random checkpoint calibrated only on the mean can
    find none in most texts and one in every other word of a few (seen on CPU, 2026-11-27: 115
    of 128 bench texts empty, the rest at 0.3 - 0.5), which costs the decoder differently."""
    words = [len(text.split()) for text in texts]
    entities = sum(found)
    return {
        "texts": len(texts),
        "words": sum(words),
        "entities": entities,
        "entities_per_word": round(entities / max(sum(words), 1), 4),
        "texts_without_entities": sum(1 for n in found if n == 0),
        "densest_text_entities_per_word": round(
            max((n / max(w, 1) for n, w in zip(found, words, strict=True)), default=0.0), 4
        ),
    }


def encoder_linears(checkpoint: Path) -> list[str]:
    """Every linear layer of ``checkpoint``'s encoder as PEFT names them (the kit's
    :mod:`~vllm_factory.testing.lora_targets`; DeBERTa: the attention projections, attention
    output, intermediate and output ``dense``): a bench adapter costs what one on all of them
    costs."""
    return lora_targets.encoder_layers(
        Path(checkpoint) / "gliner_config.json", "every", "encoder_config"
    )


def bench_adapters(checkpoint: Path, package: str, count: int, rank: int, env: Any = None) -> Path:
    """``count`` seeded LoRA adapters ``a0`` .. on ``checkpoint``'s encoder (PEFT folders made by
    the kit's ``scripts/gliner_adapter.py`` in ``env``, default the gliner + PEFT venv: rank
    ``rank`` on :func:`encoder_linears`, seeds from :data:`ADAPTER_SEED`) with PolyLoRA's
    ``manifest.json`` beside them; cached under ``.artifacts/<package>-bench/``."""
    names = adapter_names(count)
    alpha = LORA_ALPHA_PER_RANK * rank
    targets = encoder_linears(checkpoint)

    def build(target: Path) -> None:
        (env or gliner_peft_env()).ensure().run(
            ADAPTER, "--checkpoint", checkpoint, "--corpus", CORPUS,
            "--out", *(target / name for name in names), "--seed", ADAPTER_SEED,
            "--rank", rank, "--alpha", alpha, "--targets", *targets,
        )  # fmt: skip
        write_polylora_manifest(target, names)

    where = hashlib.sha256(str(Path(checkpoint).resolve()).encode()).hexdigest()[:8]
    name = f"adapters-{Path(checkpoint).parent.name}-{where}-n{count}-r{rank}-a{alpha:g}"
    root = bench_artifacts(package.replace("_", "-"))
    return cached_artifact(name, [ADAPTER, LORA_WEIGHTS], build, root=root)


def check_plugin(answer: dict) -> None:
    """The answer to one text given as a string: ``data`` is its entity list (flat)."""
    items = answer.get("data")
    if not (isinstance(items, list) and all(isinstance(item, dict) for item in items)):
        raise ValueError(f"plugin: expected one entity list, got {str(answer)[:300]}")


def bench_checkpoint(
    reference: GLiNERReference,
    package: str,
    texts: list[str],
    labels: list[str],
    env: Any = None,
    threshold: float = THRESHOLD,
    device: str = "cpu",
    dtype: str = "float32",
) -> Path:
    """``reference``'s bench-size checkpoint (its variant), scores calibrated on ``texts`` and
    ``labels`` to a trained model's entity density at ``threshold`` with gliner on ``device``
    in ``dtype`` (the run's), run through ``vllm-factory-prep``: the prepared folder, cached
    under ``.artifacts/<package>-bench/``."""

    def build(target: Path) -> None:
        texts_file = target / "calibration-texts.json"
        texts_file.write_text(json.dumps(texts))
        calibrate = ["--calibrate", ",".join(labels), "--threshold", str(threshold),
                     "--calibration-texts", texts_file,
                     "--calibration-device", device, "--calibration-dtype", dtype]  # fmt: skip
        raw = reference.build_checkpoint(target / "gliner", "bench", SEED, calibrate, env=env)
        from vllm_factory.heads.gliner.prep import prepare

        prepare(raw, target / "served")

    variant = f"-{reference.variant}" if reference.variant else ""
    inputs = [reference.builder, *KIT_INPUTS]
    root = bench_artifacts(package.replace("_", "-"))
    settings = json.dumps([texts, labels, threshold, device, dtype]).encode()
    calibration = hashlib.sha256(settings).hexdigest()
    name = f"checkpoint{variant}-bench-seed{SEED}-cal{calibration[:8]}"
    return cached_artifact(name, inputs, build, root=root) / "served"


class GLiNERBenchSpec(TextBenchSpec):
    """The spec of the GLiNER package whose ``benchmarks/bench_spec.py`` is ``spec_file``
    (``--workload long``: documents read in windows of the plugin's default overlap)."""

    reference_library = "gliner"
    reference_kit = GLiNERReference
    reference_env = staticmethod(gliner_env)

    def has_reference(self, config: BenchConfig) -> bool:
        return config.workload != LORA

    def word_texts(self) -> list[str]:
        return json.loads(CORPUS.read_text(encoding="utf-8"))["texts"]

    def baseline_args(self) -> list[str]:
        return ["--library", "gliner", "--labels", ",".join(LABELS), "--threshold", str(THRESHOLD)]

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        self.use_config(config)
        if config.checkpoint:
            return Path(config.checkpoint)
        texts = self.calibration_texts(config.lengths)
        return bench_checkpoint(
            self.reference, self.name, texts, LABELS, self.given_env(config),
            device=config.device, dtype=config.dtype,
        )  # fmt: skip

    def window_tokens(self, checkpoint: Path) -> Callable[[str], list[int]]:
        return _window_tokens(checkpoint)

    def calibration_texts(self, lengths: dict[str, float] | None = None) -> list[str]:
        """Texts made as the bench makes its own (seeded sentences of corpus and docstring
        words): :data:`CALIBRATION_TEXTS` of the run's length mix (:func:`calibration_words`);
        without ``lengths``, 2 short, 3 of ~128 and 3 of ~512 tokens (the word / token ratio of
        :meth:`flops_per_sequence`)."""
        rng = random.Random(SEED + 1)
        if lengths is None:
            counts = list(MIXED_WORDS)
        else:  # shuffled: the builder's levelling and calibration parts both hold the mix
            counts = calibration_words(lengths, rng)
            rng.shuffle(counts)
        return self.seeded_texts(counts, rng)

    def checkpoint_notes(self, checkpoint: Path) -> dict:
        """The calibration the checkpoint builder measured with gliner (``calibration.json``
        beside the served folder), if any."""
        path = checkpoint.parent / "gliner" / "calibration.json"
        return {"calibration": json.loads(path.read_text())} if path.exists() else {}

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        return max(max_tokens, 512)

    def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float | None:
        """Encoder over the whole prompt plus the span head (:mod:`vllm_factory.testing.flops`);
        words per text from the tokens by the word / token ratio of the calibration texts."""
        settings, config, full = _prompt_counter(checkpoint)
        prompt = tokens + full([])
        encoder = flops.encoder(config["encoder_config"], prompt)
        if encoder is None:
            return None
        per_token = _words_per_token(checkpoint, tuple(self.calibration_texts()))
        words = min(settings.max_len, round(tokens * per_token))
        return encoder + flops.gliner_span_head(config, prompt, words, len(LABELS))

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        return _text_tokens(checkpoint)

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        """The plugin, then gliner's own server (:mod:`vllm_factory.testing.gliner.gliner_serve`)
        on the same checkpoint; for ``--workload long`` the plugin alone, reading windows."""
        if self.workload == LORA:
            return self.lora_servers(checkpoint)
        if self.workload == LONG:
            return [plugin_server("plugin", f"plugin {self.name}_io, windows", long_plugin_body)]
        return [
            plugin_server("plugin", f"plugin {self.name}_io"),
            serve_server(
                "gliner.serve (Ray Serve)",
                lambda model, text, encoding: serve_body(text, LABELS, THRESHOLD),
                launch_gliner_serve,
            ),
        ]

    def lora_servers(self, checkpoint: Path) -> list[ServerSpec]:
        """``--workload lora``: the plugin without LoRA (``base``), with the adapters
        (``plugin``) and gliner.serve with PolyLoRA on them (``gliner-serve``)."""
        assert self._config is not None, "checkpoint() keeps the run's config first"
        config = self._config
        folder = bench_adapters(
            checkpoint, self.name, config.adapters, config.lora_rank, self.given_env(config)
        )
        names = adapter_names(config.adapters)
        adapters = {name: folder / name for name in names}
        count = f"{len(names)} LoRA adapters"

        def polylora_body(model: str, text: str, encoding: str) -> dict:
            return serve_body(text, LABELS, THRESHOLD, adapter_id=model)

        def launch(config: BenchConfig, checkpoint: Path, max_model_len: int) -> GlinerServe:
            targets = encoder_linears(checkpoint)
            args = [*polylora_args(folder, len(names), config.lora_rank, targets), "--no-compile"]
            return launch_gliner_serve(config, checkpoint, max_model_len, args)

        return [
            plugin_server("base", f"plugin {self.name}_io, base model (no LoRA)"),
            plugin_server(
                "plugin",
                f"plugin {self.name}_io, {count}",
                extra_args=lora_args(adapters, config.lora_rank),
                adapter_names=names,
            ),
            serve_server(
                f"gliner.serve PolyLoRA, {len(names)} adapter ids (none applied)",
                polylora_body,
                launch,
                adapter_names=names,
            ),
        ]


def plugin_server(
    name: str, label: str, make_body: Callable[[str, str, str], dict] = plugin_body, **more: Any
) -> ServerSpec:
    """The plugin's server (its IOProcessor named in the prepared config.json), answering
    :func:`check_plugin`'s shape; ``more``: :class:`ServerSpec`'s other fields."""
    return ServerSpec(
        name=name, label=label, io_processor_plugin=None, hf_overrides=None,
        make_body=make_body, check=check_plugin, describe=describe_entities, **more,
    )  # fmt: skip


def serve_server(
    label: str,
    make_body: Callable[[str, str, str], dict],
    launch: Callable[[BenchConfig, Path, int], GlinerServe],
    **more: Any,
) -> ServerSpec:
    """gliner.serve (``launch`` starts it) answering on its own route, as gliner's own server
    does; ``more``: :class:`ServerSpec`'s other fields."""
    return ServerSpec(
        name="gliner-serve", label=label, io_processor_plugin=None, hf_overrides=None,
        make_body=make_body, check=check_answer, describe=describe_serve_entities,
        launch=launch, path=ROUTE, **more,
    )  # fmt: skip


def launch_gliner_serve(
    config: BenchConfig, checkpoint: Path, max_model_len: int, polylora: list[str] | None = None
) -> GlinerServe:
    """gliner.serve on ``checkpoint`` with the run's device and dtype, from ``--ref-python``
    (the reference interpreter holds gliner; on a GPU host, Ray too) or the gliner-serve venv
    (with ``polylora``'s flags, :func:`polylora_args`: the one with PolyLoRA)."""
    if config.ref_python:
        python: str | Path = config.ref_python
    else:
        python = (gliner_polylora_env() if polylora else gliner_serve_env()).ensure().python
    return GlinerServe(
        checkpoint, python, device=config.device, dtype=config.dtype,
        extra_args=[*(polylora or []), *config.peer_args],
    )  # fmt: skip


@cache
def _prompt_counter(checkpoint: Path) -> tuple[Any, dict, Callable[[list[str]], int]]:
    """(gliner settings, gliner config, tokens of the full prompt for a list of text words)."""
    from transformers import AutoTokenizer
    from vllm_factory.heads.gliner.prompts import prompt_words
    from vllm_factory.heads.gliner.settings import parse_settings

    config = json.loads((checkpoint / "gliner_config.json").read_text())
    settings = parse_settings(config)
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    prompt = prompt_words(LABELS, settings.ent_token, settings.sep_token)

    def full(words: list[str]) -> int:
        return len(tokenizer(prompt + words, is_split_into_words=True)["input_ids"])

    return settings, config, full


@cache
def _text_tokens(checkpoint: Path) -> Callable[[str], int]:
    """A text's own tokens: the full prompt minus its fixed part (special tokens and the label
    prompt, the same for every text), so that "short" (8-32) fits."""
    from vllm_factory.heads.gliner.prompts import split_words

    settings, _, full = _prompt_counter(checkpoint)
    overhead = full([])

    @cache
    def count(text: str) -> int:
        return full([w.text for w in split_words(text, settings.max_len)]) - overhead

    return count


@cache
def _words_per_token(checkpoint: Path, texts: tuple[str, ...]) -> float:
    """Text words per text token over ``texts``."""
    from vllm_factory.heads.gliner.prompts import split_words

    settings, _, _ = _prompt_counter(checkpoint)
    count = _text_tokens(checkpoint)
    words = sum(len(split_words(text, settings.max_len)) for text in texts)
    return words / max(1, sum(count(text) for text in texts))


@cache
def _window_tokens(checkpoint: Path) -> Callable[[str], list[int]]:
    """``text -> text tokens of each window`` as the plugin reads it with the default overlap
    (:mod:`vllm_factory.heads.gliner.windows`): each window's full prompt, cut at the
    tokenizer's limit as gliner and the plugin cut it, minus the fixed label prompt; windows end
    at ``max_len`` words or where the label prompt leaves no more tokens, as the plugin's do."""
    from transformers import AutoTokenizer
    from vllm_factory.heads.gliner.prompts import split_words
    from vllm_factory.heads.gliner.windows import default_overlap, window_bounds
    from vllm_factory.heads.gliner.word_tokens import WordTokenizer

    settings, _, full = _prompt_counter(checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    limit = int(tokenizer.model_max_length)
    per_word = WordTokenizer(tokenizer, limit)
    overhead = full([])
    overlap = default_overlap(settings.max_len)

    def count(text: str) -> list[int]:
        words = split_words(text).texts
        bounds = window_bounds(len(words), settings.max_len, overlap,
                               per_word.word_counts(words), limit - overhead)  # fmt: skip
        return [min(full(words[a:b]), limit) - overhead for a, b in bounds]

    return count
