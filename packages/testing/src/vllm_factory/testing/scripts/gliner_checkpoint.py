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

import argparse
import copy
import json
import logging
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tiny_checkpoint import bert_bpe_tokenizer, builder_arguments, training_texts

LOG = logging.getLogger("build_checkpoint")
# The GLiNER family's parity corpus (texts and label sets), in the testing kit.
CORPUS = Path(__file__).resolve().parents[1] / "gliner" / "corpus.json"
TARGET_LOGIT_STD = 2.5
# Bench checkpoints (``--calibrate``): gliner keeps about one entity per this many words at the
# bench threshold, as trained models do on news-like text (one per 5 - 15 words). A random
# model keeps far more (every span scores ~0.5 on average), and decoding cost grows with the
# candidates, so an uncalibrated bench measures the decoder rather than the model.
WORDS_PER_ENTITY = 10.0
CALIBRATION_TEXTS, CALIBRATION_WORDS = 160, 200
# Of the calibration texts given, the first this share fit :func:`level_text_offsets` and the
# rest (texts it has not seen, as the bench's are) calibrate the density.
LEVELLING_SHARE = 0.8
# The bi-encoder's label encoder is built with the backbone's builder at seed + this.
LABELS_SEED = 7
# ``--labels-encoder bert``: a small BERT of its own width and uncased vocabulary, as the
# gliner-bi-*-v2.0 models pair their text encoder with a BGE (BERT) label encoder. Widths per
# ``--size``; 512 positions and a 512-token tokenizer limit, as BGE has.
BERT_LABELS = {
    "tiny": {"hidden": 64, "heads": 2, "inter": 128, "layers": 2, "vocab": 3000},
    "bench": {"hidden": 384, "heads": 12, "inter": 1536, "layers": 12, "vocab": 8000},
}  # fmt: skip
BERT_POSITIONS = 512


def corpus_pairs(corpus: dict) -> list[tuple[str, list[str]]]:
    return [(t, labels) for labels in corpus["label_sets"].values() for t in corpus["texts"]]


def run_one(model, text: str, labels: list[str]) -> tuple[Any, torch.Tensor]:
    """gliner's own batch pipeline on one text: its output and the ``[start, width]`` mask of
    the spans that end inside the text (the layout of its logits and span vectors)."""
    prepared = model.prepare_batch([text], labels)
    batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
    output = model.run_batch(batch)
    n_words = len(prepared["tokens"][0][: model.config.max_len])
    starts, widths = output.logits.shape[1:3]
    valid = (torch.arange(starts)[:, None] + torch.arange(widths)[None, :]) < n_words
    return output, valid


@torch.no_grad()
def all_logits(model, pairs: list[tuple[str, list[str]]]) -> torch.Tensor:
    """Raw span x label logits of every valid span, through gliner's own batch pipeline."""
    out = []
    for text, labels in pairs:
        output, valid = run_one(model, text, labels)
        out.append(output.logits[0][valid.to(output.logits.device)].flatten())
    return torch.cat(out)


@torch.no_grad()
def level_text_offsets(model, texts: list[str], labels: list[str], device: str = "cpu") -> dict:
    """Make the mean span score of a text the same for every text, so that the entity density
    of a calibrated checkpoint spreads over texts as a trained model's does.

    A random encoder gives every text's span vectors a large mean of its own (the text's
    offset): the scores of a text are ``(mean_t + deviation) . label`` and ``mean_t . label``
    moves every score of that text together, which calibrated on the mean alone left 115 of
    128 bench texts with no entity and the rest with one in every other word. The label
    projection's last layer is projected onto the complement of the span of the per-text mean
    span vectors of ``texts`` (and of their overall mean): on texts like these, labels then
    score the deviations only. Coordinate 0 (the calibration's constant) is left out.
    Needs more span coordinates than texts; gliner runs on ``device`` (in float32) meanwhile."""
    model.to(device)
    means: list[torch.Tensor] = []
    spans: list[torch.Tensor] = []
    hook = model.model.span_rep_layer.register_forward_hook(
        lambda _module, _args, output: spans.append(output)
    )
    for text in texts:
        spans.clear()
        _, valid = run_one(model, text, labels)
        vectors = spans[-1][0]
        means.append(vectors[valid.to(vectors.device)].double().mean(0)[1:].cpu())
    hook.remove()
    model.to("cpu")
    stacked = torch.stack(means)
    directions = torch.cat([stacked, stacked.mean(0, keepdim=True)])
    if directions.shape[0] >= directions.shape[1]:
        raise ValueError(f"{len(texts)} texts leave no span coordinates to score with")
    basis, singular, _ = torch.linalg.svd(directions.T, full_matrices=False)
    basis = basis[:, singular > singular[0] * 1e-9]
    keep = torch.eye(basis.shape[0], dtype=basis.dtype) - basis @ basis.T
    last = model.model.prompt_rep_layer[-1]
    before = float((directions[:-1] @ last.bias[1:].double()).std())
    last.weight[1:] = (keep @ last.weight[1:].double()).to(last.weight.dtype)
    last.bias[1:] = (keep @ last.bias[1:].double()).to(last.bias.dtype)
    report = {"texts": len(texts), "directions_removed": basis.shape[1],
              "span_coordinates": stacked.shape[1], "bias_offset_std_before": round(before, 4)}  # fmt: skip
    LOG.info("text offsets levelled: %s", report)
    return report


def calibration_texts(corpus: dict, seed: int) -> list[str]:
    """Bench-like texts: the corpus texts joined in seeded orders, ``CALIBRATION_WORDS`` words
    each."""
    rng = random.Random(seed)
    words = [w for t in corpus["texts"] for w in t.split()]
    texts = []
    for _ in range(CALIBRATION_TEXTS):
        start = rng.randrange(len(words))
        rotated = words[start:] + words[:start]
        texts.append(" ".join((rotated * 2)[:CALIBRATION_WORDS]))
    return texts


@torch.no_grad()
def calibrate_density(
    model,
    labels: list[str],
    threshold: float,
    texts: list[str],
    device: str = "cpu",
    dtype: str = "float32",
) -> dict:
    """Lower every span score by one constant, found by bisection on gliner's own entities per
    word over ``texts`` with ``labels`` (target: ``1 / WORDS_PER_ENTITY``), with gliner run on
    ``device`` in ``dtype``: the bench's device and dtype, since a random head's rescaled
    scores are sensitive enough that bfloat16 alone moves the density (a DeBERTa bench
    checkpoint calibrated in float32 to 0.094 entities per word served 0.26 in bfloat16 on an
    H200). The saved (float32) model gets the shift found there.

    A score is ``span_vector . label_vector``. Coordinate 0 of both vectors is made a constant
    (the rows of the two output layers zeroed, their biases set): every score then moves by
    exactly ``span_bias[0] * label_bias[0]``, for any label, at the cost of one of the random
    coordinates."""
    runner = model
    if (device, dtype) != ("cpu", "float32"):
        runner = copy.deepcopy(model).to(device).to(getattr(torch, dtype))
    words = sum(len(t.split()) for t in texts)

    def density() -> float:
        found = runner.inference(texts, labels, threshold=threshold, batch_size=8)
        return sum(len(entities) for entities in found) / words

    def make_constant(gliner) -> torch.nn.Linear:
        span_out = gliner.model.span_rep_layer.span_rep_layer.out_project[-1]
        label_out = gliner.model.prompt_rep_layer[-1]
        span_out.weight[0].zero_()
        label_out.weight[0].zero_()
        span_out.bias[0] = 1.0
        return label_out

    before = density()
    label_out = make_constant(runner)

    def shifted(shift: float) -> float:
        label_out.bias[0] = -shift
        return density()

    target = 1.0 / WORDS_PER_ENTITY
    low, high = 0.0, TARGET_LOGIT_STD
    while shifted(high) > target and high < 64:
        low, high = high, 2 * high
    for _ in range(8):
        middle = (low + high) / 2
        low, high = (middle, high) if shifted(middle) > target else (low, middle)
    reached = shifted(high)
    if runner is not model:
        make_constant(model).bias[0] = -high
    report = {"labels": labels, "threshold": threshold, "texts": len(texts), "words": words,
              "device": device, "dtype": dtype,
              "entities_per_word_before": round(before, 4),
              "entities_per_word": round(reached, 4), "score_shift": round(high, 4)}  # fmt: skip
    LOG.info("calibrated: %s", report)
    return report


def bert_labels_encoder(texts: list[str], size: str, seed: int, out: Path) -> None:
    """Save a random ``BertModel`` and its lowercasing tokenizer to ``out`` (a label
    encoder of another kind and width than the text encoder)."""
    from transformers import BertConfig, BertModel

    b = BERT_LABELS[size]
    tok = bert_bpe_tokenizer(texts, b["vocab"], BERT_POSITIONS, lowercase=True)
    config = BertConfig(
        vocab_size=len(tok), hidden_size=b["hidden"], num_attention_heads=b["heads"],
        intermediate_size=b["inter"], num_hidden_layers=b["layers"],
        max_position_embeddings=BERT_POSITIONS, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(out)
    tok.save_pretrained(out)


def seeded_model(model_class: type, config: Any, seed: int, markers: bool = True) -> Any:
    """gliner's ``model_class`` on the saved backbone of ``config``, its heads drawn from
    ``seed + 1``, in eval mode; with ``markers``, gliner's marker tokens are added to the
    tokenizer and the embeddings resized (uni-encoder models)."""
    torch.manual_seed(seed + 1)
    model = model_class(config, backbone_from_pretrained=True, local_files_only=True)
    if markers:
        model.data_processor.transformer_tokenizer.add_tokens(
            model._get_special_tokens(), special_tokens=True
        )
        model.resize_embeddings()
    return model.eval()


def saved_and_reloaded(model: Any, out: Path) -> Any:
    """``model`` saved to ``out`` (replacing it) with gliner's ``save_pretrained``, then loaded
    back through ``GLiNER.from_pretrained`` in eval mode; stops unless it loads as its class."""
    from gliner import GLiNER

    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out, safe_serialization=True)
    reloaded = GLiNER.from_pretrained(str(out), local_files_only=True).eval()
    if type(reloaded).__name__ != type(model).__name__:
        raise SystemExit(f"{out} reloaded as {type(reloaded).__name__}, not {type(model).__name__}")
    return reloaded


def build_gliner(
    backbone_dir: Path,
    s: dict,
    seed: int,
    corpus: dict,
    out: Path,
    center: bool = False,
    calibrate: tuple[list[str], float, list[str], str, str] | None = None,
    labels_dir: Path | None = None,
) -> None:
    """gliner's own span model on the saved backbone + tokenizer in ``backbone_dir`` (any
    encoder gliner supports): add its marker tokens, resize, scale the scores, save to ``out``.
    ``center``: first shift the label vectors to mean zero (for encoders whose random outputs
    share a large common direction, which otherwise puts nearly every score near 1).
    ``calibrate`` (labels, threshold, texts, device, dtype): level the texts' score offsets on
    the first :data:`LEVELLING_SHARE` of ``texts`` (:func:`level_text_offsets`), then lower
    every score to a trained model's entity density on the rest (:func:`calibrate_density`;
    the figures go to ``out/calibration.json``).
    ``labels_dir``: a saved encoder + tokenizer for the labels: gliner's bi-encoder span model
    (text words alone through ``backbone_dir``, each label mean-pooled through this encoder;
    no marker tokens), saved with its ``labels_tokenizer/`` as gliner saves it.
    """
    # Only the GLiNER venv has it. The span classes directly: GLiNER(config) swaps __class__,
    # which fails on this torch version.
    from gliner import GLiNERConfig
    from gliner.config import BiEncoderSpanConfig
    from gliner.model import BiEncoderSpanGLiNER, UniEncoderSpanGLiNER

    settings = {
        "model_name": str(backbone_dir), "hidden_size": s["gliner_hidden"],
        "max_width": s["max_width"], "max_len": s["max_len"], "span_mode": "markerV0",
        "subtoken_pooling": "first", "num_rnn_layers": 1, "dropout": 0.1,
        "words_splitter_type": "whitespace",
    }  # fmt: skip
    if labels_dir is None:
        config = GLiNERConfig(**settings)
    else:
        config = BiEncoderSpanConfig(labels_encoder=str(labels_dir), **settings)
    if labels_dir is None:
        model = seeded_model(UniEncoderSpanGLiNER, config, seed)
    else:
        model = seeded_model(BiEncoderSpanGLiNER, config, seed, markers=False)

    # Random heads give logits near 0: scale the label projection's last layer (the
    # logits are linear in it) so that scores cover (0, 1).
    last = model.model.prompt_rep_layer[-1]
    # Mean-pooled random label vectors share one large direction too: always centred.
    if center or labels_dir is not None:
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
    levelled = None
    if calibrate is not None:
        labels, threshold, texts, device, dtype = calibrate
        fit = round(len(texts) * LEVELLING_SHARE)
        levelled = level_text_offsets(model, texts[:fit], labels, device)
        calibrate = (labels, threshold, texts[fit:], device, dtype)
    std = float(all_logits(model, corpus_pairs(corpus)).std())
    with torch.no_grad():
        last.weight.mul_(TARGET_LOGIT_STD / std)
        last.bias.mul_(TARGET_LOGIT_STD / std)
    LOG.info("logit std %.4f scaled to %.2f", std, TARGET_LOGIT_STD)
    report = None
    if calibrate is not None:
        report = {**calibrate_density(model, *calibrate), "levelling": levelled}

    reloaded = saved_and_reloaded(model, out)
    if report is not None:
        (out / "calibration.json").write_text(json.dumps(report, indent=1) + "\n")
    probs = torch.sigmoid(all_logits(reloaded, corpus_pairs(corpus)))
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
    args = builder_arguments(doc, sizes, CORPUS, more=_calibration_arguments)
    s = sizes[args.size]

    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    tok = train_tokenizer(training_texts(corpus["texts"]), args.vocab_size, s["model_max_length"])
    LOG.info("tokenizer: %d pieces", len(tok))

    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        build_backbone(tok, s, args.seed).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        calibrate = None
        if args.calibrate:
            texts = (json.loads(args.calibration_texts.read_text()) if args.calibration_texts
                     else calibration_texts(corpus, args.seed))  # fmt: skip
            calibrate = (args.calibrate.split(","), args.threshold, texts,
                         args.calibration_device, args.calibration_dtype)  # fmt: skip
        labels_dir = None
        if args.bi_encoder:  # the label encoder: by default the same kind, other weights
            labels_dir = Path(tmp) / "labels"
            if args.labels_encoder == "bert":
                texts = training_texts(corpus["texts"])
                bert_labels_encoder(texts, args.size, args.seed + LABELS_SEED, labels_dir)
            else:
                build_backbone(tok, s, args.seed + LABELS_SEED).save_pretrained(labels_dir)
                tok.save_pretrained(labels_dir)
        build_gliner(backbone_dir, s, args.seed, corpus, args.out, center, calibrate, labels_dir)


def _calibration_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--bi-encoder", action="store_true", help="gliner's bi-encoder span model "
                    "(labels through their own encoder of the backbone's kind, as the GLiNER "
                    "linker models have it)")  # fmt: skip
    ap.add_argument("--labels-encoder", choices=["backbone", "bert"], default="backbone",
                    help="with --bi-encoder: the label encoder's kind (bert: a small BERT of "
                    "its own vocabulary, as gliner-bi-*-v2.0 have)")  # fmt: skip
    ap.add_argument("--calibrate", metavar="LABELS", help="comma-separated: calibrate the "
                    "entity density of these labels (bench checkpoints)")  # fmt: skip
    ap.add_argument("--threshold", type=float, default=0.5, help="with --calibrate")
    ap.add_argument("--calibration-texts", type=Path, help="with --calibrate: a JSON list of "
                    "texts like the bench's (default: the corpus texts joined)")  # fmt: skip
    ap.add_argument("--calibration-device", default="cpu", help="with --calibrate: where gliner "
                    "runs while calibrating (the bench's device)")  # fmt: skip
    ap.add_argument("--calibration-dtype", choices=("float32", "bfloat16", "float16"),
                    default="float32", help="with --calibrate: gliner's dtype while calibrating "
                    "(the bench's dtype; the checkpoint is saved in float32)")  # fmt: skip
