"""The GLiNER2 family's benchmark spec: a GLiNER2 package's ``benchmarks/bench_spec.py`` is
``SPEC = GLiNER2BenchSpec(__file__)`` (``nox -s bench -- --plugin NAME``).

- Checkpoint: the package's random gliner2 model of real width (its
  ``reference/build_checkpoint.py --size bench``), its heads calibrated on the bench's own
  kind of text with the bench's schema (``--calibration-texts`` / ``--calibration-schema``:
  predicted counts mostly 1-2, one span scoring >= 0.5 per :data:`WORDS_PER_SPAN` words per
  field, so that the 5 entity types together find about one entity per 10 words as a trained
  model does on news-like text, the classifier not degenerate; the figures are in the report), built once with gliner2 in its venv; cached under ``.artifacts/<package>-bench/``.
  The plugin (``--config-format gliner2``) and gliner2 both load the library's own
  ``save_pretrained`` directory; there is no prep step.
- Requests: one text per ``POST /pooling``, ``{"text": T, "schema": SCHEMA, "threshold":
  0.5}`` with the one mixed schema below (5 entity types, a 3-field structure, one relation
  type, a 3-label classification) for every text. No native vLLM model exists (vLLM has no
  DeBERTa and no GLiNER2 head).
- Reference: ``GLiNER2.batch_extract`` with ``Schema.from_dict(SCHEMA)`` on the same texts
  (the shared in-process baseline, ``--library gliner2``) at batch size 1 (as
  ``GLiNER2.extract`` runs) and the batch-size sweep; the report gives batch size 1 and the
  best one.
- Token counts (corpus lengths, tokens/s): the text's own tokens, i.e. the plugin's full
  prompt (``( [P] entities ( [E] person ... ) ) [SEP_STRUCT] ... [SEP_TEXT] words``) minus its
  fixed schema part (the same for every request).
- ``--workload long``: documents of thousands of words (:func:`~vllm_factory.testing.bench.
  build_documents`), one per request with ``long_text: "window"`` (``extract_long``'s
  windows: 384 words, 64 shared), against ``GLiNER2.extract_long`` / ``batch_extract_long`` in
  process (``scripts/long_baseline.py --library gliner2``). ``--max-model-len`` is then the
  longest window's prompt (schema included, rounded up to 64), with
  ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` past the encoder's 512 positions, so that the server
  reads the library's windows and does not split them again; token counts are summed over
  each document's windows.
- ``--workload lora`` (packages that serve LoRA: ``GLiNER2BenchSpec(__file__, lora=True)``):
  the default texts, request ``i`` naming adapter ``a<i % n>`` of ``--adapters`` n seeded
  adapters (:func:`bench_adapters`: the kit's ``scripts/gliner2_adapter.py``, gliner2's
  ``apply_lora`` on every encoder projection at rank ``--lora-rank``), on the plugin with
  vLLM's LoRA (``plugin``) against the plugin without LoRA on the same checkpoint (``base``,
  the base model alone). In process: gliner2 with the same adapters, text ``i`` under adapter
  ``a<i % n>``, each chunk's texts grouped by adapter and each group run after
  ``unload_adapter`` + ``load_adapter`` of its adapter where another one is loaded
  (``scripts/baseline.py --adapters``): at batch size 1 an adapter switch per text, as a
  gliner2 user serving several adapters from one model must do.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from vllm_factory.testing import bench, flops
from vllm_factory.testing.bench import (
    BenchConfig,
    ServerSpec,
    TextBenchSpec,
    adapter_names,
    bench_artifacts,
)
from vllm_factory.testing.gliner2.references import (
    ADAPTER,
    CASES,
    KIT_INPUTS,
    LORA_WEIGHTS,
    GLiNER2Reference,
    adapter_targets,
    gliner2_env,
)
from vllm_factory.testing.refenv import cached_artifact

SCHEMA: dict[str, Any] = {
    "entities": ["person", "organization", "location", "date", "product"],
    "structures": {
        "announcement": {
            "fields": [
                {"name": "company", "dtype": "str"},
                {"name": "product"},
                {"name": "place"},
            ]
        }
    },
    "classifications": [{"task": "sentiment", "labels": ["positive", "negative", "neutral"]}],
    "relations": ["works_for"],
}
THRESHOLD = 0.5
SEED = 0
# Span density of the bench checkpoint: one span >= 0.5 per this many words per field and
# instance, i.e. with the schema's 5 entity types about one entity per 10 words (a trained
# model on news-like text: one per 5 - 15 words; the first calibration, 10 words per field,
# gave 0.25 entities per word).
WORDS_PER_SPAN = 50.0
CONFIG_FORMAT = ["--config-format", "gliner2"]
# Queries the span head scores per word and width in the FLOPs estimate: one instance of each
# span task (5 entity types + 3 fields + head / tail of the relation).
SPAN_QUERIES = 10
ADAPTER_SEED = 1
"""Adapter ``a<i>`` is drawn with seed ``ADAPTER_SEED + i``."""
LORA_ALPHA_PER_RANK = 0.25
"""The bench adapters' ``lora_alpha`` over their rank: the kit's factors are full size at any
alpha; the scale keeps an adapter's extractions about as dense as the calibrated base
model's (the report's outputs per server show it)."""


def bench_adapters(checkpoint: Path, package: str, count: int, rank: int, env: Any = None) -> Path:
    """``count`` seeded LoRA adapters ``a0`` .. on ``checkpoint`` (PEFT folders made by the
    kit's ``scripts/gliner2_adapter.py`` with gliner2's ``apply_lora`` in ``env``, default the
    gliner2 venv: rank ``rank`` on every encoder projection, seeds from
    :data:`ADAPTER_SEED`); cached under ``.artifacts/<package>-bench/``."""
    names = adapter_names(count)
    alpha = LORA_ALPHA_PER_RANK * rank

    def build(target: Path) -> None:
        (env or gliner2_env()).ensure().run(
            ADAPTER, "--checkpoint", checkpoint, "--out", *(target / name for name in names),
            "--seed", ADAPTER_SEED, "--rank", rank, "--alpha", alpha,
            "--targets", *adapter_targets(checkpoint, "every"),
        )  # fmt: skip

    where = hashlib.sha256(str(Path(checkpoint).resolve()).encode()).hexdigest()[:8]
    name = f"adapters-{Path(checkpoint).parent.name}-{where}-n{count}-r{rank}-a{alpha:g}"
    root = bench_artifacts(package.replace("_", "-"))
    return cached_artifact(name, [ADAPTER, LORA_WEIGHTS], build, root=root)


def plugin_body(model: str, text: str, encoding: str) -> dict:
    return {"model": model, "data": {"text": text, "schema": SCHEMA, "threshold": THRESHOLD}}


# :func:`plugin_body` read whole in windows (``extract_long``'s windows, its defaults)
long_plugin_body = bench.windowed_body(plugin_body)


def describe_extractions(bodies: list[dict], answers: list[dict]) -> dict:
    """What the plugin extracted: entities (and per word), structure records and relation
    pairs (and per text), the sentiment labels chosen. A trained model finds about one entity
    per 5 - 15 words; the bench checkpoint is calibrated to that."""
    words = sum(len(body["data"]["text"].split()) for body in bodies)
    entities = records = relations = 0
    labels: dict[str, int] = {}
    for answer in answers:
        data = answer["data"]
        entities += sum(len(spans) for spans in data["entities"].values())
        records += len(data["announcement"])  # {} (not []) when its predicted count is 0
        relations += sum(len(pairs) for pairs in data["relation_extraction"].values())
        label = str(data["sentiment"])
        labels[label] = labels.get(label, 0) + 1
    texts = max(len(bodies), 1)
    return {
        "texts": len(bodies),
        "words": words,
        "entities": entities,
        "entities_per_word": round(entities / max(words, 1), 4),
        "records_per_text": round(records / texts, 3),
        "relations_per_text": round(relations / texts, 3),
        "sentiment": dict(sorted(labels.items())),
    }


def check_plugin(answer: dict) -> None:
    """The dict ``GLiNER2.extract`` returns for :data:`SCHEMA` (a span task whose predicted
    count is 0 comes back as ``{}``: entities without their type keys, the structure as
    ``{}`` instead of a record list)."""

    def lists(value: Any, names: list[str]) -> bool:
        return isinstance(value, dict) and all(
            name in names and isinstance(items, list) for name, items in value.items()
        )

    data = answer.get("data")
    records = data.get("announcement") if isinstance(data, dict) else None
    ok = (
        isinstance(data, dict)
        and lists(data.get("entities"), SCHEMA["entities"])
        and (
            records == {}
            or (isinstance(records, list) and all(isinstance(r, dict) for r in records))
        )
        and lists(data.get("relation_extraction"), SCHEMA["relations"])
        and data.get("sentiment") in (None, *SCHEMA["classifications"][0]["labels"])
    )
    if not ok:
        raise ValueError(f"plugin: not the extraction of the bench schema: {str(answer)[:300]}")


class GLiNER2BenchSpec(TextBenchSpec):
    """The spec of the GLiNER2 package whose ``benchmarks/bench_spec.py`` is ``spec_file``
    (``--workload long``: documents read in ``extract_long``'s windows)."""

    reference_library = "gliner2"
    reference_kit = GLiNER2Reference
    reference_env = staticmethod(gliner2_env)
    _checkpoint: Path | None = None

    def word_texts(self) -> list[str]:
        return [case["text"] for case in json.loads(CASES.read_text(encoding="utf-8"))]

    def baseline_args(self) -> list[str]:
        return ["--library", "gliner2", "--schema", json.dumps(SCHEMA),
                "--threshold", str(THRESHOLD)]  # fmt: skip

    def baseline(self, config: BenchConfig) -> tuple[Path, list[str]]:
        """The shared baseline; for the LoRA workload with ``--adapters`` (the bench adapters'
        folders, text ``i`` under the ``i % n``-th)."""
        script, args = super().baseline(config)
        if config.workload == bench.LORA:
            assert self._checkpoint is not None, "checkpoint() comes first"
            folder = self.adapters_folder(self._checkpoint)
            folders = [str(folder / name) for name in adapter_names(config.adapters)]
            args += ["--adapters", ",".join(folders)]
        return script, args

    def adapters_folder(self, checkpoint: Path) -> Path:
        """The run's :func:`bench_adapters` on ``checkpoint``."""
        assert self._config is not None, "checkpoint() keeps the run's config first"
        config = self._config
        return bench_adapters(
            checkpoint, self.name, config.adapters, config.lora_rank, self.given_env(config)
        )

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        """The bench checkpoint (kept for the LoRA workload's baseline adapters)."""
        self._checkpoint = self._checkpoint_of(config)
        return self._checkpoint

    def _checkpoint_of(self, config: BenchConfig) -> Path:
        self.use_config(config)
        if config.checkpoint:
            return Path(config.checkpoint)

        root = bench_artifacts(self.name.replace("_", "-"))
        # What the calibration depends on besides the builder and the kit: the texts and the
        # schema, written to a file so that the cache key covers them.
        given = root / f"calibration-inputs-seed{SEED}.json"
        data = json.dumps(
            {"schema": SCHEMA, "texts": self.calibration_texts(), "words_per_span": WORDS_PER_SPAN}
        )
        if not given.exists() or given.read_text() != data:
            root.mkdir(parents=True, exist_ok=True)
            given.write_text(data)

        def build(target: Path) -> None:
            texts = target / "calibration-texts.json"
            texts.write_text(json.dumps(json.loads(data)["texts"]))
            calibrate = ["--calibration-texts", texts, "--calibration-schema", json.dumps(SCHEMA),
                         "--words-per-span", WORDS_PER_SPAN]  # fmt: skip
            env = self.given_env(config)
            self.reference.build_checkpoint(
                target / "checkpoint", "bench", SEED, env=env,
                report=target / "calibration.json", calibrate=calibrate,
            )  # fmt: skip

        inputs = [self.reference.builder, *KIT_INPUTS, given]
        target = cached_artifact(f"checkpoint-bench-seed{SEED}", inputs, build, root=root)
        return target / "checkpoint"

    def window_tokens(self, checkpoint: Path) -> Callable[[str], list[int]]:
        return _window_tokens(checkpoint)

    def calibration_texts(self) -> list[str]:
        """Texts made as the bench makes its own (seeded sentences of case and docstring
        words), of the bench's lengths: 6 short (~12-32 text tokens), 6 of ~128 and 4 of
        ~512."""
        lengths = (6, 8, 10, 12, 14, 16, 70, 70, 70, 70, 70, 70, 270, 270, 270, 270)
        return self.seeded_texts(lengths, random.Random(SEED + 1))

    def checkpoint_notes(self, checkpoint: Path) -> dict:
        """The calibration the checkpoint builder measured with gliner2 (``calibration.json``
        beside the checkpoint), if any: the report's summary keys (entities per word before /
        after, threshold, texts, words), the other extraction figures after, and all of it
        under ``builder``."""
        path = checkpoint.parent / "calibration.json"
        if not path.exists():
            return {}
        report = json.loads(path.read_text())
        before, after = report.get("extraction_before"), report.get("extraction_after")
        if not (before and after):
            return {"calibration": {"builder": report}}
        summary = {
            "entities_per_word_before": before["entities_per_word"],
            "entities_per_word": after["entities_per_word"],
            "threshold": report["calibrated_on"]["threshold"],
            "texts": after["texts"],
            "words": after["words"],
            "records_per_text": after["records_per_text"],
            "relations_per_text": after["relations_per_text"],
            "predicted_counts": after["counts"],
            "span_words_per_kept_span": report["span"]["kept_at_0.5"]["words_per_kept_span"],
        }
        return {"calibration": {**summary, "builder": report}}

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        """The longest text plus the schema prompt, at least 512. Past 512 (the encoder's
        ``max_position_embeddings``; its relative positions are log-bucketed, and gliner2 reads
        any length) vLLM starts only with ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``, which the
        plugin's servers set (:func:`plugin_server`): 512-token texts take 609."""
        _, full = _prompt_counter(checkpoint)
        if self.workload == bench.LONG and self._config is not None:
            documents = self.corpus(self._config, checkpoint)
            assert documents is not None and documents.windows is not None
            longest = max(n for windows in documents.windows for n in windows) + full([])
            return max(-(-longest // 64) * 64, 512)
        return max(max_tokens + full([]), 512)

    def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float | None:
        """Encoder over the whole prompt (:func:`flops.encoder`) plus the span head
        (:func:`flops.gliner2_span_head`, :data:`SPAN_QUERIES` queries); words per text from
        the tokens by the word / token ratio of the calibration texts. The count head,
        count-aware query LSTM and classifier act on a few schema tokens and are left out."""
        config, full = _prompt_counter(checkpoint)
        encoder = flops.encoder(config["encoder_config"], tokens + full([]))
        if encoder is None:
            return None
        words = round(tokens * _words_per_token(checkpoint, tuple(self.calibration_texts())))
        hidden = int(config["encoder_config"]["hidden_size"])
        width = int(config["max_width"])
        return encoder + flops.gliner2_span_head(hidden, width, words, SPAN_QUERIES)

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        return _text_tokens(checkpoint)

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        if self.workload == bench.LORA:
            return self.lora_servers(checkpoint)
        long = self.workload == bench.LONG
        return [
            plugin_server(
                "plugin",
                f"plugin deberta_{self.name}_io" + (", windows" if long else ""),
                make_body=long_plugin_body if long else plugin_body,
            )
        ]

    def lora_servers(self, checkpoint: Path) -> list[ServerSpec]:
        """``--workload lora``: the plugin without LoRA (``base``) and with the adapters
        (``plugin``, requests naming them in turn)."""
        assert self._config is not None, "checkpoint() keeps the run's config first"
        folder = self.adapters_folder(checkpoint)
        names = adapter_names(self._config.adapters)
        adapters = {name: folder / name for name in names}
        plugin = f"plugin deberta_{self.name}_io"
        return [
            plugin_server("base", f"{plugin}, base model (no LoRA)"),
            plugin_server(
                "plugin",
                f"{plugin}, {len(names)} LoRA adapters",
                extra_args=[*CONFIG_FORMAT, *bench.lora_args(adapters, self._config.lora_rank)],
                adapter_names=names,
            ),
        ]


def plugin_server(
    name: str,
    label: str,
    *,
    make_body: Callable[[str, str, str], dict] = plugin_body,
    extra_args: Sequence[str] = CONFIG_FORMAT,
    **more: Any,
) -> ServerSpec:
    """The plugin's server (``--config-format gliner2`` names its IOProcessor), answering
    :func:`check_plugin`'s shape; ``more``: :class:`ServerSpec`'s other fields. It starts
    with ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``: a prompt (schema + text) may pass the encoder's
    512 positions (:meth:`GLiNER2BenchSpec.max_model_len`)."""
    return ServerSpec(
        name=name, label=label, io_processor_plugin=None, hf_overrides=None,
        make_body=make_body, check=check_plugin, extra_args=extra_args,
        describe=describe_extractions, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, **more,
    )  # fmt: skip


@cache
def _prompt_counter(checkpoint: Path) -> tuple[dict, Callable[[list[str]], int]]:
    """(gliner2 config with its ``encoder_config``, tokens of the plugin's full prompt for a
    list of text words), the prompt built as the plugin's IOProcessor builds it."""
    from transformers import AutoTokenizer
    from vllm_factory.models.gliner2.prompts import Words, build_prompt, choice_prefix, tasks_of
    from vllm_factory.models.gliner2.schema import from_dict_form

    config = json.loads((checkpoint / "config.json").read_text())
    config["encoder_config"] = json.loads(
        (checkpoint / "encoder_config" / "config.json").read_text()
    )
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    plan = from_dict_form(SCHEMA, "schema")
    tasks, prefix = tasks_of(plan), choice_prefix(plan)

    @cache
    def tokenize(item: str) -> tuple[str, ...]:
        return tuple(tokenizer.tokenize(item))

    def full(words: list[str]) -> int:
        given = Words("", list(words), [0] * len(words), [0] * len(words))
        prompt = build_prompt(
            tasks, prefix, given, lambda item: list(tokenize(item)), tokenizer.convert_tokens_to_ids
        )
        return len(prompt.token_ids)

    return config, full


@cache
def _text_tokens(checkpoint: Path) -> Callable[[str], int]:
    """A text's own tokens: the full prompt minus its fixed schema part (the same for every
    text), so that "short" (8-32) fits."""
    from vllm_factory.models.gliner2.prompts import split_words

    config, full = _prompt_counter(checkpoint)
    overhead = full([])
    max_len = config.get("max_len")

    @cache
    def count(text: str) -> int:
        return full(split_words(text, max_len).tokens) - overhead

    return count


@cache
def _words_per_token(checkpoint: Path, texts: tuple[str, ...]) -> float:
    """Text words (gliner2's, punctuation included) per text token over ``texts``."""
    from vllm_factory.models.gliner2.prompts import split_words

    count = _text_tokens(checkpoint)
    words = sum(len(split_words(text).tokens) for text in texts)
    return words / max(1, sum(count(text) for text in texts))


@cache
def _window_tokens(checkpoint: Path) -> Callable[[str], list[int]]:
    """``text -> text tokens of each window`` of ``extract_long``'s defaults
    (:func:`vllm_factory.models.gliner2.windows.split_windows`)."""
    from vllm_factory.models.gliner2.windows import (
        DEFAULT_CHUNK_OVERLAP,
        DEFAULT_CHUNK_SIZE,
        split_windows,
    )

    count = _text_tokens(checkpoint)

    def windows(text: str) -> list[int]:
        pieces = split_windows(text, DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP)
        return [count(piece.text) for piece in pieces]

    return windows
