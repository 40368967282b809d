"""LFM2-ColBERT's benchmark spec for ``python -m vllm_factory.core.testing.bench``.

- Checkpoint: a random PyLate LFM2-ColBERT of LFM2-350M's width (``reference/build_checkpoint.py
  --size bench``: hidden 1024, 16 layers of which 6 causal GQA attention (16 heads, 8 kv heads,
  head_dim 64) and 10 gated short convolutions, SwiGLU 4608, Dense 1024 -> 128), built once
  with PyLate in its reference venv and cached under ``.artifacts/lfm2_colbert-bench/``. When
  the corpus holds texts longer than PyLate's ``document_length`` (512), a sibling folder links
  the same files with ``document_length`` raised, so that nobody truncates.
- Requests: documents only (``is_query: false``), one text per ``POST /pooling``.
  Plugin: ``{"data": {"text": T, "is_query": false}}`` (PyLate tokenization:
  ``<|startoftext|> [D] T``). Native ``ColBERTLfm2Model``: ``{"input": T, "task":
  "token_embed"}`` (``<|startoftext|> T``: one token fewer). Token counts in the results are
  PyLate's. ``--encoding base64`` asks both for base64 float32 vectors.
- Reference: moderncolbert's ``pylate_baseline.py`` (it encodes any PyLate ColBERT) in the
  PyLate 1.6 venv.

FLOPs per sequence of n tokens (matmul FLOPs only, 2 per multiply-add), h hidden, i the
SwiGLU width, kv the key/value width: per token, every layer's SwiGLU ``6hi``; attention
layers ``4h^2 + 4h*kv`` (q, out, k, v) plus scores and weighted sum over the causal context
(``4h * (n + 1) / 2`` on average); convolution layers ``8h^2`` (in 3h, out h) plus the
3-tap depthwise convolution ``6h``; the Dense projection ``2h*dim``.
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
        import lfm2_colbert_reference
    finally:
        sys.path.remove(str(REFERENCE))
    return lfm2_colbert_reference


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


def _native_overrides(checkpoint: Path) -> dict:
    # vLLM's LFM2 reads Liquid AI's original config keys, which transformers does not write.
    hidden = json.loads((checkpoint / "config.json").read_text())["hidden_size"]
    return {"architectures": ["ColBERTLfm2Model"], "conv_dim": hidden, "block_dim": hidden}


def _native_body(model: str, text: str, encoding: str) -> dict:
    return {"model": model, "input": text, "task": "token_embed", "encoding_format": encoding}


def _plugin_body(model: str, text: str, encoding: str) -> dict:
    data = {"text": text, "is_query": False}
    if encoding != "float":
        data["encoding_format"] = encoding
    return {"model": model, "data": data}


class Lfm2ColBERTSpec(PluginSpec):
    name = "lfm2_colbert"
    reference_library = "PyLate"

    def word_texts(self) -> list[str]:
        corpus = json.loads((REFERENCE / "corpus.json").read_text(encoding="utf-8"))
        return [item["text"] for part in ("queries", "documents") for item in corpus[part]]

    def reference_python(self, config: BenchConfig) -> Path:
        if config.ref_python:
            return Path(config.ref_python)
        return _reference_module().pylate_env().ensure().python

    def reference_script(self) -> Path:
        return HERE.parents[1] / "moderncolbert" / "benchmarks" / "pylate_baseline.py"

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
        root = repo_root() / ".artifacts" / "lfm2_colbert-bench"
        return cached_artifact(f"checkpoint-bench-seed{SEED}", inputs, build, root=root)

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        settings = json.loads((checkpoint / "config_sentence_transformers.json").read_text())
        return max(max_tokens, settings["document_length"], settings["query_length"])

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))

        @cache
        def count(text: str) -> int:  # <|startoftext|> [D] text
            return len(tokenizer(text.strip())["input_ids"]) + 1

        return count

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        return [
            ServerSpec(
                name="native",
                label="vLLM native ColBERTLfm2Model",
                io_processor_plugin=None,
                hf_overrides=_native_overrides(checkpoint),
                make_body=_native_body,
                check=_check_native,
            ),
            ServerSpec(
                name="plugin",
                label="plugin lfm2_colbert_io",
                io_processor_plugin="lfm2_colbert_io",
                hf_overrides={"architectures": ["Lfm2ColBERTForRetrieval"]},
                make_body=_plugin_body,
                check=_check_plugin,
            ),
        ]

    def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float:
        return flops_per_sequence(_model_shape(checkpoint), tokens)

    def versions(self) -> list[str]:
        return [
            "vllm-factory-core", "vllm-factory-colbert", "vllm-factory-lfm2-colbert",
        ]  # fmt: skip


@cache
def _model_shape(checkpoint: Path) -> dict[str, object]:
    config = json.loads((checkpoint / "config.json").read_text())
    dense = json.loads((checkpoint / "1_Dense" / "config.json").read_text())
    kinds = config["layer_types"]
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    inter = int(config["intermediate_size"])
    if config.get("block_auto_adjust_ff_dim"):
        inter = int(float(config.get("block_ffn_dim_multiplier") or 1.0) * int(2 * inter / 3))
        step = int(config["block_multiple_of"])
        inter = step * ((inter + step - 1) // step)
    return {
        "hidden": hidden,
        "intermediate": inter,
        "kv": int(config["num_key_value_heads"]) * hidden // heads,
        "attention_layers": sum(1 for k in kinds if k == "full_attention"),
        "conv_layers": sum(1 for k in kinds if k != "full_attention"),
        "width": int(config.get("conv_L_cache", 3)),
        "dim": int(dense["out_features"]),
    }


def flops_per_sequence(shape: dict, tokens: int) -> float:
    """Matmul FLOPs of one forward pass over ``tokens`` tokens (see the module docstring)."""
    h, i, kv = shape["hidden"], shape["intermediate"], shape["kv"]
    layers = shape["attention_layers"] + shape["conv_layers"]
    per_token = layers * 6 * h * i + 2 * h * shape["dim"]
    per_token += shape["attention_layers"] * (4 * h * h + 4 * h * kv + 2 * h * (tokens + 1))
    per_token += shape["conv_layers"] * (8 * h * h + 2 * h * shape["width"])
    return float(tokens * per_token)


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


SPEC = Lfm2ColBERTSpec()
