"""A relex GLiNER reference checkpoint (gliner's ``UniEncoderSpanRelexGLiNER``: entities and
the relations between them) on a package's tiny backbone (runs in the gliner venv, this folder
on ``PYTHONPATH``):

    python gliner_relex_checkpoint.py --builder PKG/reference/build_checkpoint.py --out DIR \
        [--relations-layer mlp] [--seed 0] [--size tiny]

The package's builder gives sizes, tokenizer and random backbone (as for its span checkpoint);
this script builds gliner's own relex model on them (marker tokens ``<<ENT>>``, ``<<SEP>>``,
``<<REL>>``, embedding resize) and moves its random heads to where a trained model's outputs
lie, so that every threshold of the parity cases decides something:

- span scores spread to ``TARGET_LOGIT_STD`` and lowered by one constant (the constant
  coordinate of ``gliner_checkpoint.calibrate_density``) so that about ``CANDIDATE_SHARE`` of
  the spans have a label above 0.5 (the spans relations pair: a random model pairs most);
- the adjacency layer's last layer (``mlp``) centred and spread, about half the pairs kept;
- the pair projection's last layer centred (mean pair vector 0) and spread to
  ``TARGET_LOGIT_STD`` over the relation scores.

Saved with gliner's ``save_pretrained`` and reloaded through ``GLiNER.from_pretrained``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import torch
from gliner_checkpoint import TARGET_LOGIT_STD, corpus_pairs, saved_and_reloaded, seeded_model
from gliner_token_checkpoint import builder_option, variant_main

LOG = logging.getLogger("gliner_relex_checkpoint")
CANDIDATE_SHARE = 0.08
# The relation labels the parity cases ask for (also read by gliner_relex_encode.py).
RELATIONS = ["works for", "born in", "located in", "founded", "part of"]
ENTITY_LABELS = "5"  # the corpus label set the relation cases use


def relex_pairs(corpus: dict) -> list[tuple[str, list[str]]]:
    labels = corpus["label_sets"][ENTITY_LABELS]
    return [(text, labels) for text in corpus["texts"]]


@torch.no_grad()
def run(model, text: str, labels: list[str], relations: list[str], **kwargs):
    """gliner's own batch pipeline on one text: its output and the number of words scored."""
    prepared = model.prepare_batch([text], labels, None, relations)
    batch = model.collate_batch(
        prepared["input_x"], prepared["entity_types"], relation_types=prepared["relation_types"]
    )
    output = model.run_batch(batch, **kwargs)
    return output, min(len(prepared["tokens"][0]), model.config.max_len)


@torch.no_grad()
def best_span_logits(model, pairs: list[tuple[str, list[str]]]) -> torch.Tensor:
    """Every valid span's best label logit over the corpus."""
    out = []
    for text, labels in pairs:
        output, words = run(model, text, labels, [])
        logits = output.logits[0]  # [words, max_width, labels]
        starts, widths = logits.shape[:2]
        valid = (torch.arange(starts)[:, None] + torch.arange(widths)[None, :]) < words
        out.append(logits.max(-1).values[valid])
    return torch.cat(out)


@torch.no_grad()
def calibrate(model, corpus: dict) -> dict:
    gliner = model.model
    pairs = corpus_pairs(corpus)
    span_out = gliner.span_rep_layer.span_rep_layer.out_project[-1]
    label_out = gliner.prompt_rep_layer[-1]
    span_out.weight[0].zero_()  # coordinate 0 of span and label vectors: a constant
    label_out.weight[0].zero_()
    span_out.bias[0] = 1.0
    label_out.bias[0] = 0.0
    from gliner_checkpoint import all_logits

    std = float(all_logits(model, pairs).std())
    label_out.weight.mul_(TARGET_LOGIT_STD / std)
    label_out.bias.mul_(TARGET_LOGIT_STD / std)
    best = best_span_logits(model, relex_pairs(corpus))
    shift = float(torch.quantile(best, 1 - CANDIDATE_SHARE))
    label_out.bias[0] = -shift
    report = {"span_logit_std": std, "span_shift": shift}

    texts, labels = corpus["texts"], corpus["label_sets"][ENTITY_LABELS]
    layer = getattr(gliner, "relations_rep_layer", None)
    if layer is not None and hasattr(layer.relation_rep_layer, "mlp"):
        last = layer.relation_rep_layer.mlp[-1]
        seen: list[torch.Tensor] = []
        hook = last.register_forward_hook(lambda _m, _a, out: seen.append(out.flatten()))
        for text in texts:
            run(model, text, labels, RELATIONS)
        hook.remove()
        values = torch.cat(seen)
        median, spread = float(values.median()), float(values.std())
        last.bias.sub_(median)
        last.weight.mul_(TARGET_LOGIT_STD / spread)
        last.bias.mul_(TARGET_LOGIT_STD / spread)
        report["adjacency_median"], report["adjacency_std"] = median, spread

    def relation_logits() -> torch.Tensor:
        out = []
        for text in texts:
            output, _ = run(model, text, labels, RELATIONS)
            mask = output.rel_mask[0].bool()
            out.append(output.rel_logits[0][mask].flatten())
        return torch.cat(out)

    pair_out = gliner.pair_rep_layer[-1]
    vectors: list[torch.Tensor] = []
    hook = pair_out.register_forward_hook(
        lambda _m, _a, out: vectors.append(out.reshape(-1, out.shape[-1]))
    )
    logits = relation_logits()
    hook.remove()
    pair_out.bias.sub_(torch.cat(vectors).mean(0))  # pair vectors centred: scores around 0
    logits = relation_logits()
    mean, spread = float(logits.mean()), float(logits.std())
    pair_out.weight.mul_(TARGET_LOGIT_STD / spread)
    pair_out.bias.mul_(TARGET_LOGIT_STD / spread)
    report["relation_logits"] = {"count": logits.numel(), "mean": mean, "std": spread}
    return report


def build_relex_gliner(
    backbone_dir: Path, s: dict, seed: int, corpus: dict, out: Path, layer: str
) -> None:
    from gliner.config import UniEncoderSpanRelexConfig
    from gliner.model import UniEncoderSpanRelexGLiNER

    config = UniEncoderSpanRelexConfig(
        model_name=str(backbone_dir), hidden_size=s["gliner_hidden"], max_width=s["max_width"],
        max_len=s["max_len"], span_mode="markerV0", subtoken_pooling="first", num_rnn_layers=1,
        dropout=0.1, words_splitter_type="whitespace", relations_layer=layer,
    )  # fmt: skip
    model = seeded_model(UniEncoderSpanRelexGLiNER, config, seed)
    report = calibrate(model, corpus)
    LOG.info("calibrated: %s", report)

    reloaded = saved_and_reloaded(model, out)
    found = [
        reloaded.predict_relations(text, corpus["label_sets"][ENTITY_LABELS], RELATIONS)
        for text in corpus["texts"]
    ]
    LOG.info(
        "saved %s (relations_layer %s); at 0.5: %d entities, %d relations over %d texts",
        out, layer, sum(len(e) for e, _ in found), sum(len(r) for _, r in found),
        len(found),
    )  # fmt: skip


def _arguments(ap: argparse.ArgumentParser) -> None:
    builder_option(ap)
    ap.add_argument("--relations-layer", default="mlp",
                    help="gliner's relations_layer (none, dot, bilinear, mlp, ...)")  # fmt: skip


def main() -> None:
    variant_main(
        __doc__,
        lambda backbone, s, args, corpus: build_relex_gliner(
            backbone, s, args.seed, corpus, args.out, args.relations_layer
        ),
        more=_arguments,
    )


if __name__ == "__main__":
    main()
