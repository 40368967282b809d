"""Build a small, seeded, offline PyLate ColBERT checkpoint on a random ModernBERT backbone.

Runs in the PyLate reference venv (no hub access needed):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|small|bench] [--corpus corpus.json]

Steps: train a BPE tokenizer on the corpus plus stdlib docstrings, build a random
ModernBertModel with transformers' own classes, save both to a temporary backbone dir, then let
PyLate wrap it (`models.ColBERT`) and save the real PyLate on-disk layout into DIR.
"""

from __future__ import annotations

from pathlib import Path

from colbert_checkpoint import main
from tiny_checkpoint import bert_bpe_tokenizer, modernbert_backbone
from transformers import ModernBertModel, PreTrainedTokenizerFast

HERE = Path(__file__).resolve().parent

# Backbone / ColBERT shapes. head_dim = hidden / heads must be 32 or 64 (vLLM CPU attention).
SIZES: dict[str, dict[str, int]] = {
    "tiny": {
        "hidden": 128,
        "heads": 4,
        "inter": 192,
        "layers": 4,
        "global_every": 2,
        "local": 32,
        "max_pos": 512,
        "query_length": 32,
        "document_length": 96,
        "dim": 64,
    },
    # Long enough for 256-token documents, cheap enough for a 2-core CPU (the scoring bench).
    "small": {
        "hidden": 256,
        "heads": 4,
        "inter": 384,
        "layers": 4,
        "global_every": 2,
        "local": 64,
        "max_pos": 1024,
        "query_length": 32,
        "document_length": 300,
        "dim": 128,
    },
    "bench": {
        "hidden": 768,
        "heads": 12,
        "inter": 1152,
        "layers": 22,
        "global_every": 3,
        "local": 128,
        "max_pos": 8192,
        "query_length": 32,
        "document_length": 512,
        "dim": 128,
    },
}


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Lowercasing BPE on BERT pre-tokenisation with [CLS] x [SEP] (reproducible)."""
    return bert_bpe_tokenizer(texts, vocab_size, 8192, lowercase=True)


def build_backbone(tok: PreTrainedTokenizerFast, size: str, seed: int) -> ModernBertModel:
    """A random ModernBERT with global and sliding-window layers."""
    model = modernbert_backbone(tok, SIZES[size], seed)
    assert {"full_attention", "sliding_attention"} <= set(model.config.layer_types)
    return model


if __name__ == "__main__":
    main(__doc__, SIZES, train_tokenizer, build_backbone, HERE / "corpus.json")
