"""The DeBERTa-v3 half of tiny reference checkpoints on a DeBERTa-v3 encoder (runs in the
reference libraries' venvs, as ``import deberta_checkpoint`` beside the builder:
``refenv.ReferenceEnv.run`` puts this folder on ``PYTHONPATH``).

:func:`train_tokenizer` trains a SentencePiece-style Unigram vocabulary and wraps it in
transformers' own ``DebertaV2Tokenizer`` (Metaspace word starts, ``[CLS] x [SEP]``, as
DeBERTa-v3 checkpoints tokenise); :func:`build_backbone` makes a random ``DebertaV2Model`` in
the v3 layout (relative attention, log position buckets, c2p|p2c, shared attention keys,
LayerNorm on the relative embeddings) with a larger embedding matrix than the vocabulary, as
DeBERTa-v3 has. A size dict gives ``hidden``, ``heads``, ``inter``, ``layers``, ``buckets``,
``max_pos`` and optionally ``init_range`` (the initializer range, default 0.1).
"""

from __future__ import annotations

import json

import torch
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import DebertaV2Config, DebertaV2Model, DebertaV2Tokenizer

# DeBERTa-v3's ids: [PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3 (its [MASK] comes after the pieces).
SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
SPARE_EMBEDDINGS = 27  # DeBERTa-v3 has 128100 rows for 128001 tokens


def train_tokenizer(texts: list[str], vocab_size: int, max_length: int) -> DebertaV2Tokenizer:
    """Unigram pieces trained with DebertaV2Tokenizer's own normaliser / pre-tokeniser, then
    transformers' ``DebertaV2Tokenizer(vocab=...)`` builds the tokenizer from them."""
    trainer_tok = Tokenizer(models.Unigram())
    trainer_tok.normalizer = normalizers.Sequence(
        [normalizers.Replace(Regex(r"\s{2,}|[\n\r\t]"), " "), normalizers.NFC()]
    )
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, unk_token="[UNK]", shrinking_factor=0.75
    )
    trainer_tok.train_from_iterator(texts, trainer=trainer)
    pieces = json.loads(trainer_tok.to_str())["model"]["vocab"]
    vocab = [(piece, float(score)) for piece, score in pieces]
    assert [p for p, _ in vocab[: len(SPECIALS)]] == SPECIALS, vocab[:8]
    # The trainer's scores differ between runs in the last bits (its sums run in hash-map
    # order), which reorders near-equal pieces and so every id: round the scores and order
    # the pieces by score, then text, so that a rebuild gives the same checkpoint (seen: one
    # ulp everywhere, and the two rarest letters trading scores 2e-4 apart).
    rest = sorted(((p, round(score, 3)) for p, score in vocab[len(SPECIALS) :]),
                  key=lambda item: (-item[1], item[0]))  # fmt: skip
    vocab = vocab[: len(SPECIALS)] + rest
    tok = DebertaV2Tokenizer(vocab=vocab, model_max_length=max_length)
    # Stated explicitly (as converted DeBERTa-v3 tokenizer.json files do): transformers
    # versions differ in whether they derive it from the special tokens.
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.cls_token_id), ("[SEP]", tok.sep_token_id)],
    )
    return tok


def build_backbone(tok: DebertaV2Tokenizer, s: dict, seed: int) -> DebertaV2Model:
    """A random DeBERTa-v3 encoder of size ``s`` for ``tok`` (``SPARE_EMBEDDINGS`` more
    embedding rows than tokens), seeded with ``seed``."""
    config = DebertaV2Config(
        vocab_size=len(tok) + SPARE_EMBEDDINGS, hidden_size=s["hidden"],
        num_attention_heads=s["heads"], intermediate_size=s["inter"],
        num_hidden_layers=s["layers"], hidden_act="gelu", max_position_embeddings=s["max_pos"],
        type_vocab_size=0, position_biased_input=False, relative_attention=True,
        position_buckets=s["buckets"], max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
        share_att_key=True, norm_rel_ebd="layer_norm", layer_norm_eps=1e-7,
        pad_token_id=tok.pad_token_id, initializer_range=s.get("init_range", 0.1),
    )  # fmt: skip
    torch.manual_seed(seed)
    return DebertaV2Model(config).eval()
