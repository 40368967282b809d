"""Build a small, seeded, offline PyLate ColBERT checkpoint on a random LFM2 backbone.

Runs in the PyLate reference venv (no hub access needed):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench] [--corpus corpus.json]

Steps: train a byte-level BPE tokenizer (LFM2-style: ``<|startoftext|>`` prepended, no EOS
appended, no mask token) on the corpus plus stdlib docstrings, build a random ``Lfm2Model``
(short-convolution and full-attention layers) with transformers' own classes, save both to a
temporary backbone dir, then let PyLate wrap it (``models.ColBERT``) and save the real PyLate
on-disk layout into DIR.
"""

from __future__ import annotations

from pathlib import Path

import torch
from colbert_checkpoint import main
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import Lfm2Config, Lfm2Model, PreTrainedTokenizerFast

HERE = Path(__file__).resolve().parent
PAD, BOS, EOS = "<|pad|>", "<|startoftext|>", "<|im_end|>"

# head_dim = hidden / heads must be 32 or 64 (vLLM CPU attention). GQA (kv_heads < heads).
SIZES: dict[str, dict] = {
    "tiny": {
        "hidden": 128,
        "heads": 4,
        "kv_heads": 2,
        "inter": 256,
        "layer_types": ["conv", "full_attention", "conv", "conv", "full_attention", "conv"],
        "max_pos": 512,
        "query_length": 32,
        "document_length": 96,
        "dim": 64,
    },
    # LFM2-350M's shapes (1024 wide, 16 layers of which 6 attention, GQA 16/8, head_dim 64).
    "bench": {
        "hidden": 1024,
        "heads": 16,
        "kv_heads": 8,
        "inter": 6656,
        "layer_types": [
            "full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)
        ],
        "max_pos": 8192,
        "query_length": 32,
        "document_length": 512,
        "dim": 128,
    },
}


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE like LFM2's: BOS prepended, nothing appended, right padding.

    Byte-level pre-tokenisation splits punctuation from words (``"end."`` -> ``end``, ``.``),
    so PyLate's skiplist fires on the single-character punctuation tokens.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A $B:1",
        special_tokens=[(BOS, tok.token_to_id(BOS))],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        padding_side="right",
        model_max_length=8192,
    )


def build_backbone(tok: PreTrainedTokenizerFast, size: str, seed: int) -> Lfm2Model:
    s = SIZES[size]
    config = Lfm2Config(
        vocab_size=len(tok),
        hidden_size=s["hidden"],
        intermediate_size=s["inter"],
        num_hidden_layers=len(s["layer_types"]),
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        layer_types=s["layer_types"],
        max_position_embeddings=s["max_pos"],
        block_multiple_of=64 if size == "tiny" else 256,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        # A larger init than 0.02 so tokens and positions produce clearly distinct vectors.
        initializer_range=0.1,
        # LFM2's original keys, as LiquidAI's configs carry them (transformers' Lfm2Config
        # does not write them; vLLM's own LFM2 class reads them).
        conv_dim=s["hidden"],
        block_dim=s["hidden"],
    )
    torch.manual_seed(seed)
    model = Lfm2Model(config).eval()
    # Random conv kernels and norm weights: the default init leaves norms at one.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("conv.conv.weight"):
                param.normal_(0.0, 0.5)
            elif "norm" in name:
                param.uniform_(0.5, 1.5)
    return model


if __name__ == "__main__":
    main(__doc__, SIZES, train_tokenizer, build_backbone, HERE / "corpus.json", held_out=False)
