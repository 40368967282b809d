"""Build a small, seeded, offline GLiNER checkpoint on a random DeBERTa-v3 backbone.

Runs in the GLiNER reference venv (no hub access):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench]

Steps (the DeBERTa-v3 ones shared, ``deberta_checkpoint`` in the testing kit): train a
SentencePiece-style Unigram vocabulary on the corpus plus stdlib docstrings and wrap it in
transformers' own ``DebertaV2Tokenizer`` (Metaspace word starts, ``[CLS] x [SEP]``, as
DeBERTa-v3 checkpoints tokenise); save a random ``DebertaV2Model`` in the v3 layout (relative
attention, log position buckets, c2p|p2c, shared attention keys, LayerNorm on the relative
embeddings) with a larger embedding matrix than the vocabulary, as DeBERTa-v3 has; then the
GLiNER family's step (``gliner_checkpoint`` in the testing kit: gliner adds <<ENT>>/<<SEP>>
after the vocabulary and resizes the embeddings to the tokenizer length, dropping the spare
rows; label projection rescaled; gliner's ``save_pretrained``).
"""

from __future__ import annotations

from deberta_checkpoint import build_backbone, train_tokenizer
from gliner_checkpoint import main

# head_dim = hidden / heads must be 32 or 64 (vLLM CPU attention). Few position buckets in
# the tiny model so that the corpus's longer prompts reach the log-bucketed distances.
SIZES: dict[str, dict] = {
    "tiny": {
        "hidden": 128, "heads": 4, "inter": 256, "layers": 2, "buckets": 16, "max_pos": 512,
        "gliner_hidden": 96, "max_width": 8, "max_len": 48, "model_max_length": 160,
    },
    "bench": {
        "hidden": 768, "heads": 12, "inter": 3072, "layers": 12, "buckets": 256,
        "max_pos": 512, "gliner_hidden": 512, "max_width": 12, "max_len": 384,
        "model_max_length": 512,
    },
}  # fmt: skip


if __name__ == "__main__":
    main(__doc__, SIZES, train_tokenizer, build_backbone)
