"""The ColBERT family's benchmark spec: a ColBERT package's ``benchmarks/bench_spec.py``
subclasses :class:`ColBERTBenchSpec` with what is its own (vLLM's native model for the
backbone, the FLOPs of its encoder) and sets ``SPEC = MySpec(__file__)``.

- Checkpoint: the package's random PyLate ColBERT of real width (its
  ``reference/build_checkpoint.py --size bench``), built once with PyLate in its venv and
  cached under ``.artifacts/<package>-bench/``. When the corpus holds texts longer than PyLate's
  ``document_length``, a sibling folder links the same files with ``document_length`` raised,
  so that PyLate, the plugin and the native model all see every token (nobody truncates).
- Requests: one document per request, three servers side by side. Plugin: ``{"data": {"text":
  T, "is_query": false}}`` (PyLate tokenization: the document prefix token after the first
  special token). vLLM's native ColBERT model: ``{"input": T, "task": "token_embed"}`` (one
  token fewer). Token counts in the results are PyLate's. With ``--encoding base64`` both ask
  for base64 float32 vectors (the plugin through ``data.encoding_format``, native through
  vLLM's top-level ``encoding_format``), with ``base64-fp16`` for float16 ones (``embed_dtype``
  in the same places).
- Reference: PyLate's ``encode`` in process (the shared baseline, ``--library pylate``).
"""

from __future__ import annotations

import base64
import importlib
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

from vllm_factory.testing.bench import (
    BenchConfig,
    PluginSpec,
    ServerSpec,
    bench_artifacts,
    encoding_fields,
)
from vllm_factory.testing.colbert.references import KIT_INPUTS, pylate_env
from vllm_factory.testing.refenv import GivenPython, cached_artifact, package_reference

SEED = 0
SETTINGS = "config_sentence_transformers.json"


def check_plugin(answer: dict) -> None:
    item = answer["data"]  # one text: its vectors (float), or its item (base64)
    if isinstance(item, dict):  # base64 [num_tokens, dim], float32 unless "dtype" says
        width = 2 if item.get("dtype") in ("float16", "bfloat16") else 4
        size = len(base64.b64decode(item["embeddings"]))
        ok = size == width * item["num_tokens"] * item["dim"]
    else:
        ok = bool(item) and isinstance(item[0], list) and len(item[0]) >= 2
    if not ok:
        raise ValueError(f"plugin: expected one vector per token, got {str(answer)[:300]}")


def check_native(answer: dict) -> None:
    vectors = answer["data"][0]["data"]
    ok = isinstance(vectors, str) or (bool(vectors) and isinstance(vectors[0], list))
    if not ok:
        raise ValueError(f"native: expected one vector per token, got {str(answer)[:300]}")


def native_body(model: str, text: str, encoding: str) -> dict:
    return {"model": model, "input": text, "task": "token_embed", **encoding_fields(encoding)}


def plugin_body(model: str, text: str, encoding: str) -> dict:
    data = {"text": text, "is_query": False}
    if encoding != "float":
        data.update(encoding_fields(encoding))
    return {"model": model, "data": data}


class ColBERTBenchSpec(PluginSpec):
    """The spec of the ColBERT package whose ``benchmarks/bench_spec.py`` is ``spec_file``.

    ``native_architecture``: vLLM's own ColBERT model on this backbone; ``native_config``:
    ``checkpoint -> extra hf_overrides`` it needs; ``model_shape`` (``checkpoint -> shape``) and
    ``flops`` (``(shape, tokens) -> FLOPs``): the encoder's FLOPs, for MFU."""

    reference_library = "PyLate"

    def __init__(
        self,
        spec_file: str | Path,
        native_architecture: str,
        model_shape: Callable[[Path], dict] | None = None,
        flops: Callable[[dict, int], float] | None = None,
        native_config: Callable[[Path], dict] | None = None,
    ) -> None:
        self.native_architecture = native_architecture
        self.model_shape, self.flops, self.native_config = model_shape, flops, native_config
        package = Path(spec_file).resolve().parents[1]
        self.name = package.name
        self.reference = package_reference(package)
        module = importlib.import_module(f"vllm_factory.models.{self.name}")
        self.io_processor, self.architecture = module.IO_PROCESSOR, module.ARCHITECTURE

    def word_texts(self) -> list[str]:
        corpus = json.loads(self.reference.CORPUS.read_text(encoding="utf-8"))
        return [item["text"] for part in ("queries", "documents") for item in corpus[part]]

    def reference_python(self, config: BenchConfig) -> Path:
        if config.ref_python:
            return Path(config.ref_python)
        return pylate_env().ensure().python

    def baseline_args(self) -> list[str]:
        return ["--library", "pylate"]

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        base = Path(config.checkpoint) if config.checkpoint else self._build(config)
        settings = json.loads((base / SETTINGS).read_text())
        if max_tokens <= settings["document_length"]:
            return base
        return with_document_length(base, max_tokens)

    def _build(self, config: BenchConfig) -> Path:
        env = GivenPython(config.ref_python) if config.ref_python else None

        def build(target: Path) -> None:
            self.reference.build_checkpoint(target, size="bench", seed=SEED, env=env)

        inputs = [self.reference.builder, self.reference.CORPUS, *KIT_INPUTS]
        root = bench_artifacts(self.name)
        return cached_artifact(f"checkpoint-bench-seed{SEED}", inputs, build, root=root)

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        settings = json.loads((checkpoint / SETTINGS).read_text())
        return max(max_tokens, settings["document_length"], settings["query_length"])

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))

        @cache
        def count(text: str) -> int:  # the tokenizer's own sequence plus PyLate's [D]
            return len(tokenizer(text.strip())["input_ids"]) + 1

        return count

    def native_overrides(self, checkpoint: Path) -> dict:
        extra = self.native_config(checkpoint) if self.native_config else {}
        return {"architectures": [self.native_architecture], **extra}

    def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float | None:
        if self.model_shape is None or self.flops is None:
            return None
        return self.flops(self.model_shape(checkpoint), tokens)

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        return [
            ServerSpec(
                name="native",
                label=f"vLLM native {self.native_architecture}",
                io_processor_plugin=None,
                hf_overrides=self.native_overrides(checkpoint),
                make_body=native_body,
                check=check_native,
            ),
            ServerSpec(
                name="plugin",
                label=f"plugin {self.io_processor}",
                io_processor_plugin=self.io_processor,
                hf_overrides={"architectures": [self.architecture]},
                make_body=plugin_body,
                check=check_plugin,
            ),
        ]


def with_document_length(base: Path, length: int) -> Path:
    """A sibling of ``base`` linking its files, with ``document_length`` set to ``length``."""
    target = base.with_name(f"{base.name}-doclen{length}")
    if (target / SETTINGS).exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    for entry in base.iterdir():
        if entry.name in (SETTINGS, ".complete"):
            continue
        link = target / entry.name
        if not link.exists():
            link.symlink_to(entry.resolve())
    settings = json.loads((base / SETTINGS).read_text())
    settings["document_length"] = length
    (target / SETTINGS).write_text(json.dumps(settings, indent=2))
    return target
