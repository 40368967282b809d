"""Build a small, seeded, offline GLiNER checkpoint on a random ModernBERT backbone.

Runs in the GLiNER reference venv (no hub access):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench]

Steps: train a BPE tokenizer on the corpus plus stdlib docstrings, save a random
ModernBertModel (transformers' own classes) and the tokenizer to a temporary backbone dir,
build ``gliner.GLiNER`` on it (gliner adds its <<ENT>>/<<SEP>> tokens and resizes the
embeddings), rescale the last label-projection layer so that span scores spread over (0, 1)
instead of all sitting near 0.5, and save with gliner's own ``save_pretrained``.
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
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import ModernBertConfig, ModernBertModel, PreTrainedTokenizerFast

LOG = logging.getLogger("build_checkpoint")
HERE = Path(__file__).resolve().parent
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Kept out of tokenizer training so that the corpus exercises [UNK].
HELD_OUT = str.maketrans("", "", "\u2603\U0001d11e")

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
DOC_MODULES = ["argparse", "collections", "csv", "datetime", "decimal", "email", "json",
               "logging", "os", "pathlib", "re", "string", "textwrap", "unittest"]  # fmt: skip
TARGET_LOGIT_STD = 2.5


def extra_text() -> list[str]:
    out: list[str] = []
    for name in DOC_MODULES:
        mod = importlib.import_module(name)
        out.append(mod.__doc__ or "")
        for attr in sorted(dir(mod)):
            doc = getattr(getattr(mod, attr, None), "__doc__", None)
            if not attr.startswith("_") and isinstance(doc, str):
                out.append(doc)
    return [t for t in out if t.strip()]


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


def corpus_pairs(corpus: dict) -> list[tuple[str, list[str]]]:
    return [(t, labels) for labels in corpus["label_sets"].values() for t in corpus["texts"]]


@torch.no_grad()
def all_logits(model, pairs: list[tuple[str, list[str]]]) -> torch.Tensor:
    """Raw span x label logits of every valid span, through gliner's own batch pipeline."""
    out = []
    for text, labels in pairs:
        prepared = model.prepare_batch([text], labels)
        batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
        logits = model.run_batch(batch).logits[0]
        n_words = len(prepared["tokens"][0][: model.config.max_len])
        width = torch.arange(logits.shape[1])
        start = torch.arange(logits.shape[0])[:, None]
        valid = (start + width[None, :]) < n_words
        out.append(logits[valid].flatten())
    return torch.cat(out)


def build_gliner(
    backbone_dir: Path, s: dict, seed: int, corpus: dict, out: Path, center: bool = False
) -> None:
    """gliner's own span model on the saved backbone + tokenizer in ``backbone_dir`` (any
    encoder gliner supports): add its marker tokens, resize, scale the scores, save to ``out``.
    ``center``: first shift the label vectors to mean zero (for encoders whose random outputs
    share a large common direction, which otherwise puts nearly every score near 1).
    Shared with the other GLiNER packages' reference builders."""
    # Only the GLiNER venv has it. The span class directly: GLiNER(config) swaps __class__,
    # which fails on this torch version.
    from gliner import GLiNER, GLiNERConfig
    from gliner.model import UniEncoderSpanGLiNER

    config = GLiNERConfig(
        model_name=str(backbone_dir), hidden_size=s["gliner_hidden"],
        max_width=s["max_width"], max_len=s["max_len"], span_mode="markerV0",
        subtoken_pooling="first", num_rnn_layers=1, dropout=0.1,
        words_splitter_type="whitespace",
    )  # fmt: skip
    torch.manual_seed(seed + 1)
    model = UniEncoderSpanGLiNER(config, backbone_from_pretrained=True, local_files_only=True)
    model.data_processor.transformer_tokenizer.add_tokens(
        model._get_special_tokens(), special_tokens=True
    )
    model.resize_embeddings()
    model.eval()

    # Random heads give logits near 0: scale the label projection's last layer (the
    # logits are linear in it) so that scores cover (0, 1).
    last = model.model.prompt_rep_layer[-1]
    if center:
        label_vectors: list[torch.Tensor] = []
        hook = model.model.prompt_rep_layer.register_forward_hook(
            lambda _module, _args, output: label_vectors.append(
                output.reshape(-1, output.shape[-1])
            )
        )
        all_logits(model, corpus_pairs(corpus))
        hook.remove()
        with torch.no_grad():
            last.bias.sub_(torch.cat(label_vectors).mean(0))
    std = float(all_logits(model, corpus_pairs(corpus)).std())
    with torch.no_grad():
        last.weight.mul_(TARGET_LOGIT_STD / std)
        last.bias.mul_(TARGET_LOGIT_STD / std)
    LOG.info("logit std %.4f scaled to %.2f", std, TARGET_LOGIT_STD)

    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out, safe_serialization=True)

    reloaded = GLiNER.from_pretrained(str(out), local_files_only=True)
    probs = torch.sigmoid(all_logits(reloaded.eval(), corpus_pairs(corpus)))
    quantiles = torch.quantile(probs, torch.tensor([0.01, 0.1, 0.5, 0.9, 0.99])).tolist()
    LOG.info(
        "saved %s; span scores: %d, quantiles 1/10/50/90/99%%: %s; files: %s",
        out, probs.numel(), [round(q, 3) for q in quantiles],
        sorted(p.name for p in out.iterdir()),
    )  # fmt: skip


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
    s = SIZES[args.size]

    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    texts = [t.translate(HELD_OUT) for t in corpus["texts"] + extra_text()]
    tok = train_tokenizer(texts, args.vocab_size, s["model_max_length"])

    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        build_backbone(tok, s, args.seed).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        build_gliner(backbone_dir, s, args.seed, corpus, args.out)


if __name__ == "__main__":
    main()
