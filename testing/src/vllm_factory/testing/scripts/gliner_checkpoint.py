"""The GLiNER half of every GLiNER package's tiny reference checkpoint (runs in the gliner
venv, imported by the package's ``reference/build_checkpoint.py``; ``refenv.ReferenceEnv.run``
puts this folder on ``PYTHONPATH``).

A package's builder trains its tokenizer and builds its random backbone with transformers' own
classes; :func:`main` then saves both to a temporary backbone directory and builds
``gliner``'s own span model on it (:func:`build_gliner`: marker tokens, embedding resize,
label projection scaled so that span scores spread over (0, 1), ``save_pretrained``)::

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench]
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tiny_checkpoint import builder_arguments, training_texts

LOG = logging.getLogger("build_checkpoint")
# The GLiNER family's parity corpus (texts and label sets), in the testing kit.
CORPUS = Path(__file__).resolve().parents[1] / "gliner" / "corpus.json"
TARGET_LOGIT_STD = 2.5


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
    """
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


def main(
    doc: str,
    sizes: dict[str, dict],
    train_tokenizer: Callable[[list[str], int, int], Any],
    build_backbone: Callable[[Any, dict, int], Any],
    center: bool = False,
) -> None:
    """The builder's command line: tokenizer (``train_tokenizer(texts, vocab_size,
    model_max_length)``), backbone (``build_backbone(tokenizer, size, seed)``), then gliner."""
    args = builder_arguments(doc, sizes, CORPUS)
    s = sizes[args.size]

    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    tok = train_tokenizer(training_texts(corpus["texts"]), args.vocab_size, s["model_max_length"])
    LOG.info("tokenizer: %d pieces", len(tok))

    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        build_backbone(tok, s, args.seed).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        build_gliner(backbone_dir, s, args.seed, corpus, args.out, center=center)
