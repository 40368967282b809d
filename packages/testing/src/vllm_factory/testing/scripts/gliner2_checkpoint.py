"""The GLiNER2 half of every GLiNER2 package's tiny reference checkpoint (runs in the gliner2
venv, imported by the package's ``reference/build_checkpoint.py``; ``refenv.ReferenceEnv.run``
puts this folder on ``PYTHONPATH``).

A package's builder gives its tokenizer trainer and random backbone (transformers' own classes)
to :func:`main`, which trains the tokenizer on the GLiNER2 cases' texts (as given and
lower-cased, since gliner2 lower-cases every word before tokenising, plus stdlib docstrings),
saves tokenizer and backbone to a temporary directory, and builds gliner2's own model on it:
``GLiNER2(ExtractorConfig(model_name=<dir>, max_width=8, counting_layer="count_lstm",
token_pooling="first"))``, which adds its special tokens ([SEP_STRUCT] [SEP_TEXT] [P] [C] [E]
[R] [L] [EXAMPLE] [OUTPUT] [DESCRIPTION]) and resizes the embeddings to the tokenizer; the
random heads calibrated (below); ``save_pretrained(out)``; and a check that
``GLiNER2.from_pretrained(out)`` gives the same results and scores on every case::

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench] [--report calib.json] \
        [--calibration-texts texts.json --calibration-schema JSON]

Calibration. Random heads make every decoder path degenerate: the count head's argmax is one
arbitrary class (often >= 4 or always 0), span logits sit near 0 (every score ~0.5, so nearly
every span is kept at 0.5 and none at 0.7), classification logits are nearly equal. Each head is
fixed from what it outputs on the cases (through the library's own calls, ``gliner2_encode``):

(a) count head ``count_pred`` (its last ``Linear``, 20 classes; argmax = number of instances;
    0 = the task returns nothing): its logits are centred per class and scaled to std 1, classes
    4..19 get bias -30, and the biases of classes 0..3 are fitted so that the predicted counts
    over the cases are about 12% 0, 40% 1, 30% 2, 18% 3 (:data:`COUNT_TARGET`).
(b) span logits ``span_rep . query`` (``span_rep``'s final ``out_project`` Linear times the
    ``count_embed`` projector's last Linear): coordinate 0 of both is made a constant (the
    weight rows zeroed; biases 1 and ``-shift``), so every logit moves by exactly ``-shift``;
    the other rows of the span side are scaled so that the valid logits have std
    :data:`SPAN_LOGIT_STD`; ``shift`` is chosen so that at threshold 0.5 one span in
    :data:`WORDS_PER_SPAN` words per field and instance scores >= 0.5 (a trained model's density
    on news-like text: one entity per 5 - 15 words); scores then spread over (0, 1) and every
    tested threshold (0.3, 0.5, 0.7) keeps some spans and drops others.
(c) classifier (its last ``Linear``, one logit per [L] label token): logits centred and scaled
    so that, within a task, labels differ by std :data:`CLS_LOGIT_STD`; softmax and sigmoid
    probabilities are then neither uniform nor one-hot.
The figures (before/after) go to ``--report``.

Bench checkpoints calibrate on the bench's own requests instead of the cases:
``--calibration-texts`` (a JSON list of texts) each with ``--calibration-schema`` (one schema in
``Schema.from_dict`` form, JSON) at threshold 0.5; the tokenizer is still trained on the cases,
so the tiny build is unchanged. The report then also gives what gliner2 extracts from those
texts before and after (:func:`extraction_figures`: entities per word, structure records,
relations, per text).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gliner2_encode import run_case
from tiny_checkpoint import builder_arguments, training_texts

LOG = logging.getLogger("build_checkpoint")
# The GLiNER2 cases (texts and requests), in the testing kit beside the scripts.
CASES = Path(__import__("gliner2_encode").__file__).resolve().parents[1] / "gliner2" / "cases.json"

COUNT_TARGET = [0.12, 0.40, 0.30, 0.18]
SPAN_LOGIT_STD = 4.0
WORDS_PER_SPAN = 10.0
CLS_LOGIT_STD = 1.5
COMMON_QUERY = 1.0
THRESHOLDS = (0.3, 0.5, 0.7)


@torch.no_grad()
def outputs(model, cases: list[dict]) -> dict:
    """Run every case through the library; what it computed on the way: count logits,
    classifier inputs and logits (per task), span queries (``count_embed`` outputs), span
    representations of the valid spans, raw span logits (per span task)."""
    found: dict = {"count": [], "cls_in": [], "cls": [], "queries": [], "query_in": [],
                   "spans": [], "span_in": [], "span_width": [], "span": []}  # fmt: skip

    def on_classifier(module, args, out) -> None:
        found["cls_in"].append(args[0])
        found["cls"].append(out.reshape(-1))

    hooks = [
        model.count_pred.register_forward_hook(lambda m, a, out: found["count"].append(out)),
        model.classifier[-1].register_forward_hook(on_classifier),
        model.count_embed.register_forward_hook(
            lambda m, a, out: found["queries"].append(out.reshape(-1, out.shape[-1]))
        ),
        model.count_embed.projector[-1].register_forward_hook(
            lambda m, a, out: found["query_in"].append(a[0].reshape(-1, a[0].shape[-1]))
        ),
    ]
    try:
        for case in cases:
            _, seen = run_case(model, case)
            found["span"] += list(seen["span"].values())
            if any(raw is not None for raw, _ in seen["span"].values()):
                hook = model.span_rep.span_rep_layer.out_project[-1].register_forward_hook(
                    lambda m, a, out: found["span_in"].append(a[0])
                )
                rep = model.compute_span_rep(seen["token_embs"])
                hook.remove()
                valid = ~rep["span_mask"].reshape(rep["span_rep"].shape[:2])
                found["spans"].append(rep["span_rep"][valid])
                found["span_in"][-1] = found["span_in"][-1].reshape(*valid.shape, -1)[valid]
                found["span_width"].append(valid.nonzero()[:, 1])
    finally:
        for hook in hooks:
            hook.remove()
    found["count"] = torch.cat(found["count"]) if found["count"] else torch.empty(0, 20)
    return found


def count_distribution(counts: torch.Tensor) -> dict[int, int]:
    values, freq = torch.unique(counts, return_counts=True)
    return {int(v): int(f) for v, f in zip(values, freq)}


@torch.no_grad()
def calibrate_counts(model, cases: list[dict]) -> dict:
    """(a): centre and scale the count logits, fit the biases of classes 0..3."""
    last = model.count_pred[-1]
    logits = outputs(model, cases)["count"]
    before = count_distribution(logits.argmax(-1))
    mean, std = logits.mean(0), float(logits.std())
    last.weight.div_(std)
    last.bias.sub_(mean).div_(std)
    centred = (logits - mean) / std
    bias = torch.full((logits.shape[1],), -30.0)
    bias[: len(COUNT_TARGET)] = 0.0
    target = torch.tensor(COUNT_TARGET)
    for _ in range(400):  # multiplicative fit of the class frequencies
        freq = torch.bincount((centred + bias).argmax(-1), minlength=logits.shape[1])
        freq = freq[: len(COUNT_TARGET)].float() / len(centred)
        bias[: len(COUNT_TARGET)] += 0.05 * (target.log() - freq.clamp_min(1e-3).log())
    last.bias.add_(bias)
    after = count_distribution(outputs(model, cases)["count"].argmax(-1))
    LOG.info("count head: predicted counts %s -> %s", before, after)
    return {"before": before, "after": after, "bias_0_3": [round(float(b), 4) for b in bias[:4]]}


@torch.no_grad()
def calibrate_classifier(model, cases: list[dict]) -> dict:
    """(c): the last layer's weights made orthogonal to the differences between the tasks'
    mean inputs (which otherwise decide every label of a task alike), then scaled to the
    within-task spread ``CLS_LOGIT_STD``, the bias centring the logits on 0."""
    last = model.classifier[-1]
    found = outputs(model, cases)
    within_before = torch.cat([t - t.mean() for t in found["cls"]])
    between_before = torch.stack([t.mean() for t in found["cls"]])
    inputs = found["cls_in"]
    centre = torch.cat(inputs).mean(0)
    means = torch.stack([x.mean(0) for x in inputs]) - centre
    weight = last.weight[0] - torch.linalg.pinv(means) @ (means @ last.weight[0])
    within = torch.cat([(x - x.mean(0)) @ weight for x in inputs])
    scale = CLS_LOGIT_STD / float(within.std())
    last.weight[0] = weight * scale
    last.bias[0] = -float(centre @ weight) * scale
    after = outputs(model, cases)["cls"]
    report = {"within_task_std_before": round(float(within_before.std()), 5),
              "task_mean_std_before": round(float(between_before.std()), 5),
              "within_task_std_after": round(float(torch.cat([t - t.mean() for t in after]).std()), 4),
              "task_mean_std_after": round(float(torch.stack([t.mean() for t in after]).std()), 4),
              "prob_sigmoid_quantiles": quantiles(torch.sigmoid(torch.cat(after)))}  # fmt: skip
    LOG.info("classifier: %s", report)
    return report


def valid_logits(found: dict) -> tuple[torch.Tensor, int]:
    """Every valid span logit (instances x fields x start x width) and the number of
    (instance, field, word) slots they cover."""
    values, slots = [], 0
    for raw, _ in found["span"]:
        if raw is None:
            continue
        values.append(raw[torch.isfinite(raw)].flatten().float())
        slots += raw.shape[0] * raw.shape[1] * raw.shape[2]
    return torch.cat(values), slots


@torch.no_grad()
def calibrate_spans(
    model, cases: list[dict], seed: int, words_per_span: float = WORDS_PER_SPAN
) -> dict:
    """(b): the query layer's weights made orthogonal to the differences between the tasks'
    mean inputs, the span layer's to those between the texts' and the widths' mean inputs,
    span and query vectors centred (mean parts would make every field and instance of a task
    pick the same spans, and decide whole texts or widths), then a random vector common to all
    queries added (``COMMON_QUERY`` times the field-specific spread; without it, fields of long
    texts barely differ and no span of theirs is kept), a constant coordinate for an exact
    shift, the span side scaled to
    ``SPAN_LOGIT_STD``, the shift set for one span >= 0.5 per ``words_per_span`` words per
    field and instance."""
    span_out = model.span_rep.span_rep_layer.out_project[-1]
    query_out = model.count_embed.projector[-1]
    before, _ = valid_logits(outputs(model, cases))
    for layer in (span_out, query_out):
        layer.weight[0].zero_()
        layer.bias[0] = 0.0
    found = outputs(model, cases)
    inputs = found["query_in"]
    means = torch.stack([x.mean(0) for x in inputs]) - torch.cat(inputs).mean(0)
    query_out.weight.sub_(query_out.weight @ torch.linalg.pinv(means) @ means)
    inputs, widths = found["span_in"], torch.cat(found["span_width"])
    every = torch.cat(inputs)
    means = torch.cat(
        [
            torch.stack([x.mean(0) for x in inputs]),
            torch.stack([every[widths == w].mean(0) for w in widths.unique()]),
        ]
    )
    means = means - every.mean(0)
    span_out.weight.sub_(span_out.weight @ torch.linalg.pinv(means) @ means)
    found = outputs(model, cases)
    spans = torch.cat(found["spans"])
    span_out.bias.sub_(spans.mean(0))
    query_out.bias.sub_(torch.cat(found["queries"]).mean(0))
    # A query part common to every field: centred queries of long texts differ little
    # between fields, so their spans would all score near the mean.
    field_std = float(valid_logits(outputs(model, cases))[0].std())
    common = torch.randn(spans.shape[1], generator=torch.Generator().manual_seed(seed + 2))
    common[0] = 0.0
    common *= COMMON_QUERY * field_std / float(((spans - spans.mean(0)) @ common).std())
    query_out.bias.add_(common)
    logits, slots = valid_logits(outputs(model, cases))
    scale = SPAN_LOGIT_STD / float(logits.std())
    span_out.weight.mul_(scale)
    span_out.bias.mul_(scale)
    keep = max(1, round(slots / words_per_span))
    shift = float(torch.topk(logits * scale, keep).values[-1])
    span_out.bias[0] = 1.0
    query_out.bias[0] = -shift
    after, slots = valid_logits(outputs(model, cases))
    report = {"logit_std_before": round(float(before.std()), 5), "scale": round(scale, 4),
              "shift": round(shift, 4), "valid_spans": after.numel(), "slots": slots,
              "prob_quantiles_after": quantiles(torch.sigmoid(after))}  # fmt: skip
    for t in THRESHOLDS:
        kept = int((torch.sigmoid(after) >= t).sum())
        report[f"kept_at_{t}"] = {"spans": kept, "fraction": round(kept / after.numel(), 5),
                                  "words_per_kept_span": round(slots / max(kept, 1), 2)}  # fmt: skip
    LOG.info("span logits: %s", report)
    return report


def quantiles(x: torch.Tensor) -> list[float]:
    q = torch.quantile(x.float(), torch.tensor([0.01, 0.1, 0.5, 0.9, 0.99]))
    return [round(float(v), 4) for v in q]


def calibration_cases(texts_file: Path, schema_json: str) -> list[dict]:
    """The bench's requests as cases: every text with the one schema, threshold 0.5."""
    texts = json.loads(texts_file.read_text(encoding="utf-8"))
    request = {"schema": json.loads(schema_json), "threshold": 0.5}
    return [{"id": f"calibration-{i}", "text": text, "request": request}
            for i, text in enumerate(texts)]  # fmt: skip


def extraction_figures(model, cases: list[dict]) -> dict:
    """What gliner2 returns for ``cases`` (``Schema.from_dict`` requests), summed over them:
    words (the library's, after ``max_len``), entities (and per word), structure records,
    relation pairs, the classification labels chosen (str results), and the predicted counts of
    the span tasks."""
    figures: dict = {"texts": len(cases), "words": 0, "entities": 0, "records": 0,
                     "relations": 0, "labels": {}, "counts": {}}  # fmt: skip
    for case in cases:
        result, seen = run_case(model, case)
        figures["words"] += len(seen["batch"].text_tokens[0])
        for _, count in seen["span"].values():
            figures["counts"][count] = figures["counts"].get(count, 0) + 1
        for key, value in result.items():
            if key == "entities":
                figures["entities"] += sum(len(spans) for spans in value.values())
            elif key == "relation_extraction":
                figures["relations"] += sum(len(pairs) for pairs in value.values())
            elif isinstance(value, str):  # a classification's label
                figures["labels"][value] = figures["labels"].get(value, 0) + 1
            elif isinstance(value, list):  # a structure's records ({} when its count is 0)
                figures["records"] += len(value)
    words, texts = max(figures["words"], 1), max(len(cases), 1)
    figures["counts"] = dict(sorted(figures["counts"].items()))
    figures["entities_per_word"] = round(figures["entities"] / words, 4)
    for key in ("entities", "records", "relations"):
        figures[f"{key}_per_text"] = round(figures[key] / texts, 3)
    return figures


def check_reload(model, out: Path, cases: list[dict]) -> None:
    """``GLiNER2.from_pretrained(out)`` must give the in-memory model's results and scores."""
    from gliner2 import GLiNER2

    reloaded = GLiNER2.from_pretrained(str(out)).eval()
    for case in cases:
        (res_a, seen_a), (res_b, seen_b) = run_case(model, case), run_case(reloaded, case)
        assert json.dumps(res_a) == json.dumps(res_b), (case["id"], res_a, res_b)
        for task, (raw, count) in seen_a["span"].items():
            other, other_count = seen_b["span"][task]
            assert count == other_count, case["id"]
            assert (raw is None and other is None) or torch.equal(raw, other), case["id"]
        for task, probs in seen_a["cls"].items():
            assert torch.equal(probs, seen_b["cls"][task]), case["id"]
    LOG.info("reloaded %s: identical results and scores on %d cases", out, len(cases))


def main(
    doc: str,
    sizes: dict[str, dict],
    train_tokenizer: Callable[[list[str], int, int], Any],
    build_backbone: Callable[[Any, dict, int], Any],
    backbone_name: str,
) -> None:
    """The builder's command line: ``train_tokenizer(texts, vocab_size, model_max_length)``
    and ``build_backbone(tokenizer, size, seed)`` (a transformers model with
    ``save_pretrained``) are the package's; ``backbone_name`` is saved as the encoder's name
    (the temporary directory's path would be saved otherwise; nothing reads it back)."""

    def more(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--report", type=Path, help="write the calibration figures here")
        ap.add_argument(
            "--calibration-texts",
            type=Path,
            help="a JSON list of texts: calibrate "
            "on these, each with --calibration-schema, not on the cases (bench)",
        )
        ap.add_argument("--calibration-schema", help="with --calibration-texts: the schema of "
                        "every calibration request (Schema.from_dict form, JSON)")  # fmt: skip
        ap.add_argument("--words-per-span", type=float, default=WORDS_PER_SPAN,
                        help="span density target: one span >= 0.5 per this many words per "
                        "field and instance")  # fmt: skip

    args = builder_arguments(doc, sizes, CASES, more)
    s = sizes[args.size]
    from gliner2 import ExtractorConfig, GLiNER2

    cases = json.loads(args.corpus.read_text(encoding="utf-8"))
    texts = [c["text"] for c in cases]
    tok = train_tokenizer(training_texts(texts + [t.lower() for t in texts]), args.vocab_size,
                          s["model_max_length"])  # fmt: skip
    LOG.info("tokenizer: %d pieces", len(tok))
    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        build_backbone(tok, s, args.seed).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        torch.manual_seed(args.seed + 1)
        config = ExtractorConfig(model_name=str(backbone_dir), max_width=s["max_width"],
                                 counting_layer="count_lstm", token_pooling="first")  # fmt: skip
        model = GLiNER2(config).eval()
    # The temporary backbone path would otherwise be saved (config.json, encoder_config/);
    # nothing reads it back (from_pretrained builds the encoder from encoder_config/).
    model.config.model_name = model.encoder.config._name_or_path = backbone_name
    model.sync_collapsed_decode = False
    calibration = cases
    report: dict = {"size": args.size, "seed": args.seed, "cases": len(cases)}
    if args.calibration_texts is not None:
        if not args.calibration_schema:
            raise SystemExit("--calibration-texts needs --calibration-schema")
        calibration = calibration_cases(args.calibration_texts, args.calibration_schema)
        report["calibrated_on"] = {"texts": len(calibration),
                                   "schema": json.loads(args.calibration_schema),
                                   "threshold": 0.5}  # fmt: skip
        report["extraction_before"] = extraction_figures(model, calibration)
    report.update({"count": calibrate_counts(model, calibration),
                   "classifier": calibrate_classifier(model, calibration),
                   "span": calibrate_spans(model, calibration, args.seed,
                                           args.words_per_span)})  # fmt: skip
    if args.calibration_texts is not None:
        report["extraction_after"] = extraction_figures(model, calibration)
        LOG.info("extraction on the calibration texts: %s -> %s",
                 report["extraction_before"], report["extraction_after"])  # fmt: skip
    if args.out.exists():
        shutil.rmtree(args.out)
    model.save_pretrained(str(args.out))
    LOG.info("saved %s: %s", args.out, sorted(p.name for p in args.out.iterdir()))
    check_reload(model, args.out, calibration)
    if args.report is not None:
        args.report.write_text(json.dumps(report, indent=1, default=_plain) + "\n")


def _plain(value):
    return value.item() if isinstance(value, np.generic) else str(value)
