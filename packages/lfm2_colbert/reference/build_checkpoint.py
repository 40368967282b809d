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

import argparse
import importlib
import json
import logging
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import Lfm2Config, Lfm2Model, PreTrainedTokenizerFast

LOG = logging.getLogger("build_checkpoint")
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
DOC_MODULES = [
    "argparse", "collections", "csv", "datetime", "decimal", "email", "functools",
    "http.client", "json", "logging", "os", "pathlib", "re", "statistics", "string",
    "textwrap", "inspect", "unittest", "urllib.parse", "zipfile",
]  # fmt: skip


def extra_text() -> list[str]:
    """Docstrings of stdlib modules and their public members, as training sentences."""
    out: list[str] = []
    for name in DOC_MODULES:
        mod = importlib.import_module(name)
        out.append(mod.__doc__ or "")
        for attr in sorted(dir(mod)):
            doc = getattr(getattr(mod, attr, None), "__doc__", None)
            if not attr.startswith("_") and isinstance(doc, str):
                out.append(doc)
    return [t for t in out if t.strip()]


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


def check_not_degenerate(colbert: object, texts: list[str]) -> float:
    """Mean off-diagonal cosine between token vectors of one document; must be well below 1."""
    vecs = colbert.encode([texts[0]], is_query=False, convert_to_numpy=True)[0]
    sims = vecs @ vecs.T
    n = len(vecs)
    mean_off = float((sims.sum() - np.trace(sims)) / max(n * n - n, 1))
    if n < 2 or mean_off > 0.95:
        raise RuntimeError(f"degenerate token vectors (mean off-diagonal cosine {mean_off:.3f})")
    return mean_off


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--corpus", type=Path, default=HERE / "corpus.json")
    ap.add_argument("--vocab-size", type=int, default=4000)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    corpus_texts = [x["text"] for part in ("queries", "documents") for x in corpus[part]]
    tok = train_tokenizer(corpus_texts + extra_text(), args.vocab_size)
    LOG.info("tokenizer vocab: %d", len(tok))

    from pylate import models  # imported late: heavy, and only the PyLate venv has it

    s = SIZES[args.size]
    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        build_backbone(tok, args.size, args.seed).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        # PyLate adds "[Q] "/"[D] " tokens (resizing embeddings), a random Dense projection,
        # and (no mask token) pads queries with EOS. Re-seed so the Dense init is reproducible.
        torch.manual_seed(args.seed + 1)
        colbert = models.ColBERT(
            model_name_or_path=str(backbone_dir),
            device="cpu",
            embedding_size=s["dim"],
            query_length=s["query_length"],
            document_length=s["document_length"],
        )
        if args.out.exists():
            shutil.rmtree(args.out)
        colbert.save(str(args.out))

    reloaded = models.ColBERT(model_name_or_path=str(args.out), device="cpu")
    mean_cos = check_not_degenerate(reloaded, [corpus["documents"][2]["text"]])
    LOG.info(
        "saved %s (%s, seed %d); mean token cosine in one doc %.3f; files: %s",
        args.out,
        args.size,
        args.seed,
        mean_cos,
        sorted(p.name for p in args.out.iterdir()),
    )


if __name__ == "__main__":
    main()
