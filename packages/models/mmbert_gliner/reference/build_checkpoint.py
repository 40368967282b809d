"""Build a small, seeded, offline GLiNER checkpoint on a random ModernBERT backbone.

Runs in the GLiNER reference venv (no hub access):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench]

Steps: train a BPE tokenizer on the corpus plus stdlib docstrings, save a random
ModernBertModel (transformers' own classes) and the tokenizer to a temporary backbone dir,
then the GLiNER family's step (``gliner_checkpoint`` in the testing kit: gliner adds its
<<ENT>>/<<SEP>> tokens and resizes the embeddings, the last label-projection layer is rescaled
so that span scores spread over (0, 1) instead of all sitting near 0.5, gliner's own
``save_pretrained``).
"""

from __future__ import annotations

from gliner_checkpoint import main
from tiny_checkpoint import bert_bpe_tokenizer
from tiny_checkpoint import modernbert_backbone as build_backbone  # the name variants call
from transformers import PreTrainedTokenizerFast

# head_dim = hidden / heads must be 32 or 64 (vLLM CPU attention). The GLiNER hidden size
# differs from the backbone's so the checkpoint has gliner's projection layer; a BiLSTM is on.
SIZES: dict[str, dict] = {
    "tiny": {
        "hidden": 128, "heads": 4, "inter": 192, "layers": 2, "global_every": 2, "local": 32,
        "max_pos": 512, "gliner_hidden": 96, "max_width": 8, "max_len": 48,
        "model_max_length": 160,
    },
    "bench": {
        "hidden": 768, "heads": 12, "inter": 1152, "layers": 22, "global_every": 3,
        "local": 128, "max_pos": 8192, "gliner_hidden": 768, "max_width": 12, "max_len": 384,
        "model_max_length": 8192,
    },
}  # fmt: skip


def train_tokenizer(texts: list[str], vocab_size: int, max_length: int) -> PreTrainedTokenizerFast:
    """Cased BPE on BERT pre-tokenisation with [CLS] x [SEP] (reproducible)."""
    return bert_bpe_tokenizer(texts, vocab_size, max_length, lowercase=False)


if __name__ == "__main__":
    main(__doc__, SIZES, train_tokenizer, build_backbone)
