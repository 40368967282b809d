"""Build a small, seeded, offline PyLate ColBERT checkpoint on a random ModernBERT backbone.

Runs in the PyLate reference venv (no hub access needed):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|small|bench] [--corpus corpus.json]

Steps: train a BPE tokenizer on the corpus plus stdlib docstrings, build a random
ModernBertModel with transformers' own classes, save both to a temporary backbone dir, then let
PyLate wrap it (`models.ColBERT`) and save the real PyLate on-disk layout into DIR.
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
from tokenizers import (
    Tokenizer,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import ModernBertConfig, ModernBertModel, PreTrainedTokenizerFast

LOG = logging.getLogger("build_checkpoint")
HERE = Path(__file__).resolve().parent
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Characters kept out of tokenizer training so that the corpus exercises [UNK].
HELD_OUT = str.maketrans("", "", "\u2603\U0001d11e")  # snowman, treble clef

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
# Extra tokenizer training text: docstrings of a fixed list of stdlib modules (offline and
# deterministic for a given Python version).
DOC_MODULES = [
    "argparse",
    "collections",
    "csv",
    "datetime",
    "decimal",
    "email",
    "functools",
    "http.client",
    "json",
    "logging",
    "os",
    "pathlib",
    "re",
    "statistics",
    "string",
    "textwrap",
    "inspect",
    "unittest",
    "urllib.parse",
    "zipfile",
]


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
    """Train a lowercasing, accent-keeping BPE tokenizer with BERT-style [CLS] x [SEP].

    BPE on BERT pre-tokenisation (each punctuation mark is its own token, so the document
    skiplist really fires). Not WordPiece: tokenizers' WordPiece trainer (and BPE with a "##"
    continuing prefix) gave a different vocabulary on each run; plain BPE is reproducible.
    """
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=True
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
        tokenizer_object=tok,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        model_max_length=8192,
    )


def build_backbone(tok: PreTrainedTokenizerFast, size: str, seed: int) -> ModernBertModel:
    """A random ModernBERT with global and sliding-window layers; slightly wider init."""
    s = SIZES[size]
    config = ModernBertConfig(
        vocab_size=len(tok),
        hidden_size=s["hidden"],
        num_attention_heads=s["heads"],
        intermediate_size=s["inter"],
        num_hidden_layers=s["layers"],
        global_attn_every_n_layers=s["global_every"],
        local_attention=s["local"],
        max_position_embeddings=s["max_pos"],
        pad_token_id=tok.pad_token_id,
        cls_token_id=tok.cls_token_id,
        bos_token_id=tok.cls_token_id,
        sep_token_id=tok.sep_token_id,
        eos_token_id=tok.sep_token_id,
        # A larger init than 0.02 so tokens and positions produce clearly distinct vectors.
        initializer_range=0.1,
    )
    torch.manual_seed(seed)
    model = ModernBertModel(config).eval()
    assert {"full_attention", "sliding_attention"} <= set(config.layer_types), config.layer_types
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
    texts = [t.translate(HELD_OUT) for t in corpus_texts + extra_text()]
    tok = train_tokenizer(texts, args.vocab_size)
    LOG.info("tokenizer vocab: %d", len(tok))

    from pylate import models  # imported late: heavy, and only the PyLate venv has it

    s = SIZES[args.size]
    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        build_backbone(tok, args.size, args.seed).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        # PyLate adds "[Q] "/"[D] " tokens (resizing embeddings) and a random Dense projection;
        # re-seed so that the Dense init is reproducible too. PyLate defaults are kept for
        # prefixes, attend_to_expansion_tokens, do_query_expansion and skiplist_words.
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
