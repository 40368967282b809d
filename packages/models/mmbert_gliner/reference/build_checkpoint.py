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

import torch
from gliner_checkpoint import main
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import ModernBertConfig, ModernBertModel, PreTrainedTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

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
    """Cased, accent-keeping BPE on BERT pre-tokenisation with [CLS] x [SEP] (reproducible)."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS)
    tok.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        pad_token="[PAD]", mask_token="[MASK]", model_max_length=max_length,
    )  # fmt: skip


def build_backbone(tok: PreTrainedTokenizerFast, s: dict, seed: int) -> ModernBertModel:
    config = ModernBertConfig(
        vocab_size=len(tok), hidden_size=s["hidden"], num_attention_heads=s["heads"],
        intermediate_size=s["inter"], num_hidden_layers=s["layers"],
        global_attn_every_n_layers=s["global_every"], local_attention=s["local"],
        max_position_embeddings=s["max_pos"], pad_token_id=tok.pad_token_id,
        cls_token_id=tok.cls_token_id, bos_token_id=tok.cls_token_id,
        sep_token_id=tok.sep_token_id, eos_token_id=tok.sep_token_id, initializer_range=0.1,
    )  # fmt: skip
    torch.manual_seed(seed)
    return ModernBertModel(config).eval()


if __name__ == "__main__":
    main(__doc__, SIZES, train_tokenizer, build_backbone)
