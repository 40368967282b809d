"""LFM2-ColBERT's benchmark spec for ``nox -s bench -- --plugin lfm2_colbert``: the ColBERT
family's spec (:mod:`vllm_factory.testing.colbert.bench`) with what is LFM2's own.

- Checkpoint: ``reference/build_checkpoint.py --size bench``, LFM2-350M's width: hidden 1024,
  16 layers of which 6 causal GQA attention (16 heads, 8 kv heads, head_dim 64) and 10 gated
  short convolutions, SwiGLU 4608, Dense 1024 -> 128.
- Native model: vLLM's ``ColBERTLfm2Model`` (``<|startoftext|> T``; the plugin sends PyLate's
  ``<|startoftext|> [D] T``), with the config keys vLLM's LFM2 reads.

FLOPs per sequence of n tokens (matmul FLOPs only, 2 per multiply-add), h hidden, i the
SwiGLU width, kv the key/value width: per token, every layer's SwiGLU ``6hi``; attention
layers ``4h^2 + 4h*kv`` (q, out, k, v) plus scores and weighted sum over the causal context
(``4h * (n + 1) / 2`` on average); convolution layers ``8h^2`` (in 3h, out h) plus the
3-tap depthwise convolution ``6h``; the Dense projection ``2h*dim``.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from vllm_factory.testing.colbert.bench import ColBERTBenchSpec


def native_config(checkpoint: Path) -> dict:
    """vLLM's LFM2 reads Liquid AI's original config keys, which transformers does not write."""
    hidden = json.loads((checkpoint / "config.json").read_text())["hidden_size"]
    return {"conv_dim": hidden, "block_dim": hidden}


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


SPEC = ColBERTBenchSpec(
    __file__,
    "ColBERTLfm2Model",
    model_shape=_model_shape,
    flops=flops_per_sequence,
    native_config=native_config,
)
