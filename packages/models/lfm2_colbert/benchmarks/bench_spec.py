"""LFM2-ColBERT's benchmark spec for ``nox -s bench -- --plugin lfm2_colbert``: the ColBERT
family's spec (:mod:`vllm_factory.testing.colbert.bench`) with what is LFM2's own.

- Checkpoint: ``reference/build_checkpoint.py --size bench``, LFM2-350M's width: hidden 1024,
  16 layers of which 6 causal GQA attention (16 heads, 8 kv heads, head_dim 64) and 10 gated
  short convolutions, SwiGLU 4608, Dense 1024 -> 128.
- Native model: vLLM's ``ColBERTLfm2Model`` (``<|startoftext|> T``; the plugin sends PyLate's
  ``<|startoftext|> [D] T``), with the config keys vLLM's LFM2 reads.

FLOPs per sequence of n tokens (matmul FLOPs only, 2 per multiply-add): the LFM2 language
model (:func:`vllm_factory.testing.flops.lfm2_flops`, causal) and the Dense projection
``2h*dim`` per token.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from vllm_factory.testing.colbert.bench import ColBERTBenchSpec
from vllm_factory.testing.flops import lfm2_flops, lfm2_shape


def native_config(checkpoint: Path) -> dict:
    """vLLM's LFM2 reads Liquid AI's original config keys, which transformers does not write."""
    hidden = json.loads((checkpoint / "config.json").read_text())["hidden_size"]
    return {"conv_dim": hidden, "block_dim": hidden}


@cache
def _model_shape(checkpoint: Path) -> dict[str, object]:
    config = json.loads((checkpoint / "config.json").read_text())
    dense = json.loads((checkpoint / "1_Dense" / "config.json").read_text())
    return {**lfm2_shape(config), "dim": int(dense["out_features"])}


def flops_per_sequence(shape: dict, tokens: int) -> float:
    """Matmul FLOPs of one forward pass over ``tokens`` tokens (see the module docstring)."""
    return lfm2_flops(shape, tokens) + 2.0 * tokens * shape["hidden"] * shape["dim"]


SPEC = ColBERTBenchSpec(
    __file__,
    "ColBERTLfm2Model",
    model_shape=_model_shape,
    flops=flops_per_sequence,
    native_config=native_config,
)
