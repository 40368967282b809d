"""Build a small, seeded, offline GLiNER checkpoint on a random mT5 encoder.

Runs in the GLiNER reference venv (no hub access):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench]

Steps: train a SentencePiece Unigram tokenizer on the corpus plus stdlib docstrings
and wrap it in transformers' own ``T5Tokenizer`` (``</s>`` appended, no BOS, no CLS/SEP, as
real mT5 checkpoints), save a random ``MT5EncoderModel`` and the tokenizer to a temporary
backbone dir, then the GLiNER family's step (``gliner_checkpoint`` in the testing kit; gliner's own
classes: marker tokens, embedding resize, score scaling, ``save_pretrained``).
"""

from __future__ import annotations

import io

import sentencepiece as spm
import torch
from gliner_checkpoint import main
from transformers import MT5Config, MT5EncoderModel, T5Tokenizer

SPECIALS = ["<pad>", "</s>", "<unk>"]  # T5's ids 0, 1, 2

# d_kv must be 32 or 64; heads * d_kv != d_model in "tiny" (T5 allows it). Few buckets and
# a short max_distance so the corpus reaches the logarithmic buckets and the clamp.
SIZES: dict[str, dict] = {
    "tiny": {
        "d_model": 128, "d_kv": 32, "heads": 6, "d_ff": 192, "layers": 2, "buckets": 16,
        "max_distance": 24, "gliner_hidden": 96, "max_width": 8, "max_len": 48,
        "model_max_length": 160,
    },
    "bench": {  # mT5-base's encoder
        "d_model": 768, "d_kv": 64, "heads": 12, "d_ff": 2048, "layers": 12, "buckets": 32,
        "max_distance": 128, "gliner_hidden": 768, "max_width": 12, "max_len": 384,
        "model_max_length": 1024,
    },
}  # fmt: skip


def train_tokenizer(texts: list[str], vocab_size: int, max_length: int) -> T5Tokenizer:
    """SentencePiece Unigram (T5's ids: <pad> 0, </s> 1, <unk> 2, no BOS), its pieces and
    scores loaded into transformers' ``T5Tokenizer``. sentencepiece, not the tokenizers
    trainer: the latter's Unigram vocabulary differs from run to run."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
        model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1,
        character_coverage=1.0, hard_vocab_limit=False, minloglevel=2,
    )  # fmt: skip
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    assert [piece for piece, _ in vocab[:3]] == SPECIALS, vocab[:3]
    return T5Tokenizer(vocab=vocab, extra_ids=0, model_max_length=max_length)


def build_backbone(tok: T5Tokenizer, s: dict, seed: int) -> MT5EncoderModel:
    config = MT5Config(
        vocab_size=len(tok), d_model=s["d_model"], d_kv=s["d_kv"], d_ff=s["d_ff"],
        num_layers=s["layers"], num_heads=s["heads"], relative_attention_num_buckets=s["buckets"],
        relative_attention_max_distance=s["max_distance"], feed_forward_proj="gated-gelu",
        tie_word_embeddings=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id, initializer_factor=1.0,
    )  # fmt: skip
    torch.manual_seed(seed)
    return MT5EncoderModel(config).eval()


if __name__ == "__main__":
    main(__doc__, SIZES, train_tokenizer, build_backbone, center=True)
