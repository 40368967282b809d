"""ModernColBERT's benchmark spec for ``python -m vllm_factory.core.testing.bench``.

- Checkpoint: a random PyLate ModernColBERT of real width (``reference/build_checkpoint.py
  --size bench``: ModernBERT hidden 768, 22 layers, 12 heads, GeGLU MLP 1152, alternating
  global / 128-token sliding-window attention, Dense 768 -> 128), built once with PyLate in
  its reference venv and cached under ``.artifacts/moderncolbert-bench/``. When the corpus
  holds texts longer than PyLate's ``document_length`` (512), a sibling folder links the same
  files with ``document_length`` raised, so that PyLate, the plugin and the native model all
  see every token (nobody truncates).
- Requests: documents only (``is_query: false``), one text per ``POST /pooling``.
  Plugin: ``{"data": {"text": T, "is_query": false}}`` (PyLate tokenization: ``[CLS] [D] T
  [SEP]``). Native ``ColBERTModernBertModel``: ``{"input": T, "task": "token_embed"}``
  (``[CLS] T [SEP]``: one token fewer). Token counts in the results are PyLate's. With
  ``--encoding base64`` both ask for base64 float32 vectors (the plugin through
  ``data.encoding_format``, native through vLLM's top-level ``encoding_format``).
- Reference: ``pylate_baseline.py`` in the PyLate 1.6 venv.

FLOPs per sequence of n tokens (matmul FLOPs only, 2 per multiply-add; embeddings are
look-ups; norms, activations and softmax are left out), with h hidden, i intermediate:

- per layer and token: QKV ``2*h*3h`` + output ``2*h*h`` + GeGLU in ``2*h*2i`` + out
  ``2*i*h`` = ``8h^2 + 6hi``;
- attention per layer and token: scores ``2*h*ctx`` + weighted sum ``2*h*ctx``, where ctx is
  n for global layers and ``min(n, local_attention + 1)`` for sliding-window layers;
- the Dense projection ``2*h*dim`` per token.

For the bench model at n = 512 that is about 239 MFLOP per token.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

from vllm_factory.core.testing.bench import BenchConfig, PluginSpec, ServerSpec, repo_root
from vllm_factory.core.testing.refenv import cached_artifact

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent / "reference"
SEED = 0


def _reference_module():
    sys.path.insert(0, str(REFERENCE))
    try:
        import moderncolbert_reference
    finally:
        sys.path.remove(str(REFERENCE))
    return moderncolbert_reference


def _check_plugin(answer: dict) -> None:
    item = answer["data"][0]
    embeddings = item["embeddings"]
    if isinstance(embeddings, str):  # base64 float32 [num_tokens, dim]
        ok = len(base64.b64decode(embeddings)) == 4 * item["num_tokens"] * item["dim"]
    else:
        ok = bool(embeddings) and len(embeddings[0]) >= 2
    if not ok:
        raise ValueError(f"plugin: expected one vector per token, got {str(answer)[:300]}")


def _check_native(answer: dict) -> None:
    vectors = answer["data"][0]["data"]
    ok = isinstance(vectors, str) or (bool(vectors) and isinstance(vectors[0], list))
    if not ok:
        raise ValueError(f"native: expected one vector per token, got {str(answer)[:300]}")


def _native_body(model: str, text: str, encoding: str) -> dict:
    return {"model": model, "input": text, "task": "token_embed", "encoding_format": encoding}


def _plugin_body(model: str, text: str, encoding: str) -> dict:
    data = {"text": text, "is_query": False}
    if encoding != "float":
        data["encoding_format"] = encoding
    return {"model": model, "data": data}


class ModernColBERTSpec(PluginSpec):
    name = "moderncolbert"
    reference_library = "PyLate"

    def word_texts(self) -> list[str]:
        corpus = json.loads((REFERENCE / "corpus.json").read_text(encoding="utf-8"))
        return [item["text"] for part in ("queries", "documents") for item in corpus[part]]

    def reference_python(self, config: BenchConfig) -> Path:
        if config.ref_python:
            return Path(config.ref_python)
        return _reference_module().pylate_env().ensure().python

    def reference_script(self) -> Path:
        return HERE / "pylate_baseline.py"

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        base = Path(config.checkpoint) if config.checkpoint else self._build(config)
        settings = json.loads((base / "config_sentence_transformers.json").read_text())
        if max_tokens <= settings["document_length"]:
            return base
        return _with_document_length(base, max_tokens)

    def _build(self, config: BenchConfig) -> Path:
        python = self.reference_python(config)

        def build(target: Path) -> None:
            subprocess.run(
                [str(python), str(REFERENCE / "build_checkpoint.py"), "--out", str(target),
                 "--size", "bench", "--seed", str(SEED)],
                check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )  # fmt: skip

        inputs = [REFERENCE / "build_checkpoint.py", REFERENCE / "corpus.json"]
        root = repo_root() / ".artifacts" / "moderncolbert-bench"
        return cached_artifact(f"checkpoint-bench-seed{SEED}", inputs, build, root=root)

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        settings = json.loads((checkpoint / "config_sentence_transformers.json").read_text())
        return max(max_tokens, settings["document_length"], settings["query_length"])

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))

        @cache
        def count(text: str) -> int:  # [CLS] [D] text [SEP]
            return len(tokenizer(text.strip())["input_ids"]) + 1

        return count

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        return [
            ServerSpec(
                name="native",
                label="vLLM native ColBERTModernBertModel",
                io_processor_plugin=None,
                hf_overrides={"architectures": ["ColBERTModernBertModel"]},
                make_body=_native_body,
                check=_check_native,
            ),
            ServerSpec(
                name="plugin",
                label="plugin moderncolbert_io",
                io_processor_plugin="moderncolbert_io",
                hf_overrides={"architectures": ["ModernColBERTForRetrieval"]},
                make_body=_plugin_body,
                check=_check_plugin,
            ),
        ]

    def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float:
        return flops_per_sequence(_model_shape(checkpoint), tokens)

    def versions(self) -> list[str]:
        return [
            "vllm-factory-core", "vllm-factory-modernbert", "vllm-factory-colbert",
            "vllm-factory-moderncolbert", "vllm-factory-kernels",
        ]  # fmt: skip


@cache
def _model_shape(checkpoint: Path) -> dict[str, object]:
    config = json.loads((checkpoint / "config.json").read_text())
    dense = json.loads((checkpoint / "1_Dense" / "config.json").read_text())
    every = int(config.get("global_attn_every_n_layers", 1))
    layers = int(config["num_hidden_layers"])
    kinds = config.get("layer_types") or [
        "full_attention" if i % every == 0 else "sliding_attention" for i in range(layers)
    ]
    return {
        "hidden": int(config["hidden_size"]),
        "intermediate": int(config["intermediate_size"]),
        "local": int(config.get("local_attention", 0)),
        "global_layers": sum(1 for k in kinds if k == "full_attention"),
        "local_layers": sum(1 for k in kinds if k != "full_attention"),
        "dim": int(dense["out_features"]),
    }


def flops_per_sequence(shape: dict, tokens: int) -> float:
    """Matmul FLOPs of one forward pass over ``tokens`` tokens (see the module docstring)."""
    h, i = shape["hidden"], shape["intermediate"]
    layers = shape["global_layers"] + shape["local_layers"]
    dense = 8 * h * h + 6 * h * i
    attention = (
        4
        * h
        * (
            shape["global_layers"] * tokens
            + shape["local_layers"] * min(tokens, shape["local"] + 1)
        )
    )
    return float(tokens * (layers * dense + attention + 2 * h * shape["dim"]))


def _with_document_length(base: Path, length: int) -> Path:
    """A sibling of ``base`` linking its files, with ``document_length`` set to ``length``."""
    target = base.with_name(f"{base.name}-doclen{length}")
    settings_name = "config_sentence_transformers.json"
    if (target / settings_name).exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    for entry in base.iterdir():
        if entry.name in (settings_name, ".complete"):
            continue
        link = target / entry.name
        if not link.exists():
            link.symlink_to(entry.resolve())
    settings = json.loads((base / settings_name).read_text())
    settings["document_length"] = length
    (target / settings_name).write_text(json.dumps(settings, indent=2))
    return target


SPEC = ModernColBERTSpec()
