"""What every tiny reference checkpoint builder shares (runs in the reference libraries'
venvs, as ``import tiny_checkpoint`` beside the builder: ``refenv.ReferenceEnv.run`` puts this
folder on ``PYTHONPATH``).

Tokenizers are trained offline on the family's corpus plus the docstrings of some stdlib
modules (more words than the corpus alone), with a few characters held out so that the corpus
exercises the unknown token.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import random
from collections.abc import Callable
from pathlib import Path

# Kept out of tokenizer training so that the corpus exercises [UNK].
HELD_OUT = str.maketrans("", "", "\u2603\U0001d11e")
DOC_MODULES = ["argparse", "collections", "csv", "datetime", "decimal", "email", "json",
               "logging", "os", "pathlib", "re", "string", "textwrap", "unittest"]  # fmt: skip


def extra_text(modules: list[str] = DOC_MODULES) -> list[str]:
    """Docstrings of ``modules`` and their public members, as training sentences."""
    out: list[str] = []
    for name in modules:
        mod = importlib.import_module(name)
        out.append(mod.__doc__ or "")
        for attr in sorted(dir(mod)):
            doc = getattr(getattr(mod, attr, None), "__doc__", None)
            if not attr.startswith("_") and isinstance(doc, str):
                out.append(doc)
    return [t for t in out if t.strip()]


def training_texts(
    texts: list[str], modules: list[str] = DOC_MODULES, held_out: bool = True
) -> list[str]:
    """``texts`` plus :func:`extra_text`, without the held-out characters (``held_out``)."""
    texts = texts + extra_text(modules)
    return [t.translate(HELD_OUT) for t in texts] if held_out else texts


def bpe_tokenizer(
    texts: list[str],
    vocab_size: int,
    specials: list[str],
    frame: tuple[str, str],
    shape=None,
    **names,
):
    """A byte-pair tokenizer trained on ``texts`` with ``specials`` first in its vocabulary,
    framing each text as ``first x last`` (``frame``), as a transformers
    ``PreTrainedTokenizerFast``. ``shape(tok)`` sets the normalizer, pre-tokenizer and decoder
    before training; ``names``: the special-token names and ``model_max_length`` for
    transformers (``unk_token`` is also the model's unknown token).
    """
    from tokenizers import Tokenizer, models, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=names["unk_token"]))
    if shape is not None:
        shape(tok)
    tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(vocab_size=vocab_size,
                                                                 special_tokens=specials))  # fmt: skip
    first, last = frame
    tok.post_processor = processors.TemplateProcessing(
        single=f"{first} $A {last}",
        pair=f"{first} $A {last} $B:1 {last}:1",
        special_tokens=[(first, tok.token_to_id(first)), (last, tok.token_to_id(last))],
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, **names)


def bert_bpe_tokenizer(texts: list[str], vocab_size: int, max_length: int, lowercase: bool):
    """:func:`bpe_tokenizer` on BERT pre-tokenisation with ``[CLS] x [SEP]`` (accents kept;
    each punctuation mark its own token, so a ColBERT skiplist really fires). Not WordPiece:
    tokenizers' WordPiece trainer (and BPE with a "##" continuing prefix) gave a different
    vocabulary on each run; plain BPE is reproducible.
    """
    from tokenizers import normalizers, pre_tokenizers

    def shape(tok) -> None:
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=lowercase
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    return bpe_tokenizer(
        texts, vocab_size, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], ("[CLS]", "[SEP]"),
        shape, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
        mask_token="[MASK]", model_max_length=max_length,
    )  # fmt: skip


def modernbert_backbone(tok, s: dict, seed: int, initializer_range: float = 0.1):
    """A random ``ModernBertModel`` with ``tok``'s special tokens and the sizes ``s`` (hidden,
    heads, inter, layers, global_every, local, max_pos), in eval mode. Its init is wider than
    transformers' 0.02 by default, so that tokens and positions give clearly distinct vectors."""
    import torch
    from transformers import ModernBertConfig, ModernBertModel

    config = ModernBertConfig(
        vocab_size=len(tok), hidden_size=s["hidden"], num_attention_heads=s["heads"],
        intermediate_size=s["inter"], num_hidden_layers=s["layers"],
        global_attn_every_n_layers=s["global_every"], local_attention=s["local"],
        max_position_embeddings=s["max_pos"], pad_token_id=tok.pad_token_id,
        cls_token_id=tok.cls_token_id, bos_token_id=tok.cls_token_id,
        sep_token_id=tok.sep_token_id, eos_token_id=tok.sep_token_id,
        initializer_range=initializer_range,
    )  # fmt: skip
    torch.manual_seed(seed)
    return ModernBertModel(config).eval()


def script_parser(doc: str, inputs: str, outs: bool = False) -> argparse.ArgumentParser:
    """A reference script's command line with its three required paths: ``--checkpoint``,
    ``--<inputs>`` (the corpus or the cases) and ``--out`` (``outs``: one or more, a list);
    the script adds its own options."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    for option in ("--checkpoint", f"--{inputs}"):
        ap.add_argument(option, required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path, nargs="+" if outs else None)
    return ap


def builder_arguments(
    doc: str,
    sizes: dict,
    corpus: Path,
    more: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """A checkpoint builder's command line (``--out``, ``--seed``, ``--size``, ``--corpus``,
    ``--vocab-size``, and what ``more`` adds), parsed; logging set up and the generators
    seeded."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    if more is not None:
        more(ap)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=sorted(sizes), default="tiny")
    ap.add_argument("--corpus", type=Path, default=corpus)
    ap.add_argument("--vocab-size", type=int, default=4000)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    seed_everything(args.seed)
    return args


def seed_everything(seed: int) -> None:
    """Python's and numpy's generators (torch is seeded where each model is built)."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
