"""ModernColBERT's benchmark spec for ``nox -s bench -- --plugin moderncolbert``: the ColBERT
family's spec (:mod:`vllm_factory.testing.colbert.bench`: requests, PyLate baseline, three
servers) with what is ModernBERT's own.

- Checkpoint: ``reference/build_checkpoint.py --size bench``: ModernBERT hidden 768, 22
  layers, 12 heads, GeGLU MLP 1152, alternating global / 128-token sliding-window attention,
  Dense 768 -> 128.
- Native model: vLLM's ``ColBERTModernBertModel`` (``[CLS] T [SEP]``; the plugin sends PyLate's
  ``[CLS] [D] T [SEP]``).

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

import json
from functools import cache
from pathlib import Path

from vllm_factory.testing import flops
from vllm_factory.testing.colbert.bench import ColBERTBenchSpec


@cache
def _model_shape(checkpoint: Path) -> dict[str, object]:
    dense = json.loads((checkpoint / "1_Dense" / "config.json").read_text())
    return {
        "config": json.loads((checkpoint / "config.json").read_text()),
        "dim": int(dense["out_features"]),
    }


def flops_per_sequence(shape: dict, tokens: int) -> float:
    """Matmul FLOPs of one forward pass over ``tokens`` tokens (see the module docstring)."""
    config = shape["config"]
    return flops.modernbert(config, tokens) + 2.0 * tokens * config["hidden_size"] * shape["dim"]


SPEC = ColBERTBenchSpec(
    __file__, "ColBERTModernBertModel", model_shape=_model_shape, flops=flops_per_sequence
)
