"""EmbeddingGemma's benchmark spec for ``python -m vllm_factory.testing.bench``.

- Checkpoint: a random sentence-transformers EmbeddingGemma of real width
  (``reference/build_checkpoint.py --size bench``: Gemma3 hidden 768, 24 layers, 3 query heads
  and 1 KV head of 256, MLP 1152, five 512-token sliding-window layers per global layer,
  Dense 768 -> 3072 -> 768), built once in the sentence-transformers venv and cached under
  ``.artifacts/embeddinggemma-bench/``. ``max_seq_length`` is 2048, so nobody truncates.
- Requests: one text per ``POST /pooling``, no prompt name (raw text, as native gets it).
  Plugin: ``{"data": {"text": T}}``. Native ``Gemma3TextModel`` (vLLM reads the checkpoint's
  Dense modules itself): ``{"input": T, "task": "embed"}``. Both return one 768-d vector.
- Reference: ``SentenceTransformer.encode`` in the sentence-transformers venv (the shared
  in-process baseline, ``--library sentence-transformers``).

FLOPs per sequence of n tokens (matmuls only, 2 per multiply-add), hidden h, MLP i, q query
heads and k KV heads of size d: per layer and token ``2*h*(q+2k)*d`` (QKV) + ``2*q*d*h``
(output) + ``6*h*i`` (gated MLP); attention ``4*q*d*ctx`` with ctx = n on global layers and
``min(n, window + 1)`` on sliding ones (keys within window // 2 either side); then the
Dense layers once per sequence.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

from vllm_factory.testing.bench import (
    BenchConfig,
    PluginSpec,
    ServerSpec,
    encoding_fields,
    repo_root,
)
from vllm_factory.testing.refenv import SCRIPTS, cached_artifact, script_env

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent / "reference"
SEED = 0


def _reference_module():
    sys.path.insert(0, str(REFERENCE))
    try:
        import embeddinggemma_reference
    finally:
        sys.path.remove(str(REFERENCE))
    return embeddinggemma_reference


def _check_plugin(answer: dict) -> None:
    vector = answer["data"]  # one text: its vector
    if not (isinstance(vector, list) and len(vector) >= 2):
        raise ValueError(f"plugin: expected one vector, got {str(answer)[:300]}")


def _check_native(answer: dict) -> None:
    vector = answer["data"][0]["data"]
    if not (isinstance(vector, str) or (isinstance(vector, list) and len(vector) >= 2)):
        raise ValueError(f"native: expected one vector, got {str(answer)[:300]}")


def _native_body(model: str, text: str, encoding: str) -> dict:
    return {"model": model, "input": text, "task": "embed", **encoding_fields(encoding)}


def _plugin_body(model: str, text: str, encoding: str) -> dict:
    if encoding != "float":
        raise ValueError("the embeddinggemma plugin answers JSON floats only (--encoding float)")
    return {"model": model, "data": {"text": text}}


class EmbeddingGemmaSpec(PluginSpec):
    name = "embeddinggemma"
    reference_library = "sentence-transformers"

    def word_texts(self) -> list[str]:
        corpus = json.loads((REFERENCE / "corpus.json").read_text(encoding="utf-8"))
        return [item["text"] for item in corpus["texts"]]

    def reference_python(self, config: BenchConfig) -> Path:
        if config.ref_python:
            return Path(config.ref_python)
        return _reference_module().st_env().ensure().python

    def baseline_args(self) -> list[str]:
        return ["--library", "sentence-transformers"]

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        if config.checkpoint:
            return Path(config.checkpoint)
        python = self.reference_python(config)

        def build(target: Path) -> None:
            subprocess.run(
                [str(python), str(REFERENCE / "build_checkpoint.py"), "--out", str(target),
                 "--size", "bench", "--seed", str(SEED)],
                check=True, env=script_env(),
            )  # fmt: skip

        inputs = [REFERENCE / "build_checkpoint.py", REFERENCE / "corpus.json"]
        inputs.append(SCRIPTS / "tiny_checkpoint.py")
        root = repo_root() / ".artifacts" / "embeddinggemma-bench"
        return cached_artifact(f"checkpoint-bench-seed{SEED}", inputs, build, root=root)

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        # sentence-transformers 6 keeps max_seq_length as the tokenizer's model_max_length.
        sbert = json.loads((checkpoint / "sentence_bert_config.json").read_text())
        tokenizer = json.loads((checkpoint / "tokenizer_config.json").read_text())
        limit = sbert.get("max_seq_length") or tokenizer["model_max_length"]
        return max(max_tokens, int(limit))

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))

        @cache
        def count(text: str) -> int:  # <bos> text <eos>
            return len(tokenizer(text)["input_ids"])

        return count

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        return [
            ServerSpec(
                name="native",
                label="vLLM native Gemma3TextModel",
                io_processor_plugin=None,
                hf_overrides=None,
                make_body=_native_body,
                check=_check_native,
            ),
            ServerSpec(
                name="plugin",
                label="plugin embeddinggemma_io",
                io_processor_plugin="embeddinggemma_io",
                hf_overrides={"architectures": ["EmbeddingGemmaForEmbedding"]},
                make_body=_plugin_body,
                check=_check_plugin,
            ),
        ]

    def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float:
        return flops_per_sequence(_model_shape(checkpoint), tokens)


@cache
def _model_shape(checkpoint: Path) -> dict:
    config = json.loads((checkpoint / "config.json").read_text())
    kinds = config["layer_types"]
    dense = []
    for folder in sorted(checkpoint.glob("*_Dense")):
        spec = json.loads((folder / "config.json").read_text())
        dense.append((int(spec["in_features"]), int(spec["out_features"])))
    return {
        "hidden": int(config["hidden_size"]),
        "intermediate": int(config["intermediate_size"]),
        "heads": int(config["num_attention_heads"]),
        "kv_heads": int(config["num_key_value_heads"]),
        "head_dim": int(config["head_dim"]),
        "window": int(config["sliding_window"]),
        "global_layers": sum(1 for k in kinds if k == "full_attention"),
        "local_layers": sum(1 for k in kinds if k != "full_attention"),
        "dense": dense,
    }


def flops_per_sequence(shape: dict, tokens: int) -> float:
    """Matmul FLOPs of one forward pass over ``tokens`` tokens (see the module docstring)."""
    h, i, d = shape["hidden"], shape["intermediate"], shape["head_dim"]
    q, k = shape["heads"], shape["kv_heads"]
    layers = shape["global_layers"] + shape["local_layers"]
    per_token = 2 * h * (q + 2 * k) * d + 2 * q * d * h + 6 * h * i
    context = shape["global_layers"] * tokens + shape["local_layers"] * min(
        tokens, shape["window"] + 1
    )
    attention = 4 * q * d * context
    dense = sum(2 * a * b for a, b in shape["dense"])
    return float(tokens * (layers * per_token + attention) + dense)


SPEC = EmbeddingGemmaSpec()
