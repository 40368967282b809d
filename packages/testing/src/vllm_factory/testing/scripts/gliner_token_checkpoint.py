"""A token-level GLiNER reference checkpoint (``span_mode: token_level``) on a package's tiny
backbone (runs in the gliner venv, this folder on ``PYTHONPATH``):

    python gliner_token_checkpoint.py --builder PKG/reference/build_checkpoint.py --out DIR \
        [--seed 0] [--size tiny|bench]

The package's builder module gives its sizes, tokenizer and random backbone (as for its span
checkpoint); this script then builds gliner's own token model on them
(``UniEncoderTokenGLiNER``: marker tokens, embedding resize), shifts and scales the scorer's
last layer so that each of the start / end / inside logits has mean 0 and a spread of
``TARGET_LOGIT_STD`` over the corpus (a random scorer's logits sit near one value), and saves
it with gliner's ``save_pretrained``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import tempfile
from pathlib import Path
from types import ModuleType

import torch
from gliner_checkpoint import (
    CORPUS,
    TARGET_LOGIT_STD,
    corpus_pairs,
    saved_and_reloaded,
    seeded_model,
)
from tiny_checkpoint import builder_arguments, training_texts

LOG = logging.getLogger("gliner_token_checkpoint")


def package_builder(path: Path) -> ModuleType:
    """The package's ``build_checkpoint.py`` as a module (its ``SIZES``, ``train_tokenizer``,
    ``build_backbone``), without running its command line."""
    spec = importlib.util.spec_from_file_location("package_builder", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@torch.no_grad()
def token_logits(model, pairs: list[tuple[str, list[str]]]) -> torch.Tensor:
    """``[n, 3]``: the start / end / inside logits of every (word, label) of the corpus, through
    gliner's own batch pipeline (one text at a time)."""
    out = []
    for text, labels in pairs:
        prepared = model.prepare_batch([text], labels)
        batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
        logits = model.run_batch(batch).logits[0]  # [words, labels, 3]
        words = min(len(prepared["tokens"][0]), model.config.max_len)
        out.append(logits[:words].reshape(-1, 3))
    return torch.cat(out)


def build_token_gliner(backbone_dir: Path, s: dict, seed: int, corpus: dict, out: Path) -> None:
    from gliner.config import UniEncoderTokenConfig
    from gliner.model import UniEncoderTokenGLiNER

    config = UniEncoderTokenConfig(
        model_name=str(backbone_dir), hidden_size=s["gliner_hidden"], max_width=s["max_width"],
        max_len=s["max_len"], subtoken_pooling="first", num_rnn_layers=1, dropout=0.1,
        words_splitter_type="whitespace",
    )  # fmt: skip
    model = seeded_model(UniEncoderTokenGLiNER, config, seed)

    last = model.model.scorer.out_mlp[-1]
    pairs = corpus_pairs(corpus)
    logits = token_logits(model, pairs)
    mean, std = logits.mean(0), logits.std(0)
    with torch.no_grad():
        last.bias.sub_(mean)
        scale = (TARGET_LOGIT_STD / std)[:, None]
        last.weight.mul_(scale)
        last.bias.mul_(scale[:, 0])
    LOG.info(
        "token logits mean %s std %s -> 0, %.2f", mean.tolist(), std.tolist(), TARGET_LOGIT_STD
    )

    reloaded = saved_and_reloaded(model, out)
    probs = torch.sigmoid(token_logits(reloaded, pairs))
    quantiles = torch.quantile(probs, torch.tensor([0.01, 0.1, 0.5, 0.9, 0.99]), dim=0)
    LOG.info(
        "saved %s; (word, label) scores: %d, start/end/inside quantiles 1/10/50/90/99%%: %s",
        out, probs.shape[0], [[round(q, 3) for q in row] for row in quantiles.T.tolist()],
    )  # fmt: skip


def builder_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--builder", required=True, type=Path,
                    help="the package's reference/build_checkpoint.py")  # fmt: skip


def variant_main(doc: str, build, more=builder_option) -> None:
    """The command line of a GLiNER variant's checkpoint builder: the package's builder
    (``--builder``) trains the tokenizer and builds the backbone into a temporary folder, then
    ``build(backbone_dir, sizes, args, corpus)`` builds the variant on it into ``args.out``;
    ``more`` adds the variant's options (``--builder`` among them)."""
    import sys

    builder = package_builder(Path(sys.argv[sys.argv.index("--builder") + 1]))
    args = builder_arguments(doc, builder.SIZES, CORPUS, more=more)
    s = builder.SIZES[args.size]
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    tok = builder.train_tokenizer(
        training_texts(corpus["texts"]), args.vocab_size, s["model_max_length"]
    )
    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        builder.build_backbone(tok, s, args.seed).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        build(backbone_dir, s, args, corpus)


def main() -> None:
    variant_main(
        __doc__,
        lambda backbone, s, args, corpus: build_token_gliner(
            backbone, s, args.seed, corpus, args.out
        ),
    )


if __name__ == "__main__":
    main()
