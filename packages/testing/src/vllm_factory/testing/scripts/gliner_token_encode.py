"""Reference outputs of gliner's token-level model for the corpus (runs in the gliner venv):

    python gliner_token_encode.py --checkpoint DIR --corpus corpus.json --out ref.npz \
        --entities ref.json [--bf16-out ref-bf16.npz]

As ``gliner_encode.py`` for span models, with the token model's score tensor: for every
(label set, text) the sigmoid start / end / inside scores ``[words, labels, 3]`` (one text at a
time), the token ids and the number of words scored; the entity lists of ``GLiNER.inference``
per decoding mode and threshold; and the entities restricted to ``input_spans`` (no
``class_probs``: gliner's token decoder has none).
"""

from __future__ import annotations

import argparse
import json
from functools import partial
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from gliner_encode import MODES, load, mention_spans, score_arrays

KEYS = ("start", "end", "text", "label", "score")


@torch.no_grad()
def token_scores(model, text: str, labels: list[str]) -> tuple[np.ndarray, list[int], int]:
    prepared = model.prepare_batch([text], labels)
    batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
    output = model.run_batch(batch)
    n_words = min(len(prepared["tokens"][0]), model.config.max_len)
    probs = torch.sigmoid(output.logits[0][:n_words].float()).numpy()
    ids = batch["input_ids"][0][batch["attention_mask"][0].bool()].tolist()
    return probs, ids, n_words


def entity_lists(model, corpus: dict) -> dict:
    entities: dict = {"versions": {p: version(p) for p in ("gliner", "torch", "transformers")}}
    spans = [mention_spans(text, i) for i, text in enumerate(corpus["texts"])]
    entities["input_spans"] = spans
    for name, labels in corpus["label_sets"].items():
        for threshold in corpus["thresholds"]:
            for mode, kwargs in MODES.items():
                result = model.inference(
                    corpus["texts"], labels, threshold=threshold, batch_size=8, **kwargs
                )
                entities[f"{name}/{mode}/{threshold}"] = [
                    [{k: e[k] for k in KEYS} for e in ents] for ents in result
                ]
            result = model.inference(
                corpus["texts"], labels, threshold=threshold, batch_size=8, input_spans=spans
            )
            entities[f"{name}/input_spans/{threshold}"] = [
                [{k: e[k] for k in KEYS} for e in ents] for ents in result
            ]
    return entities


def encode_main(model_class: str, scores, cases, bf16_cases: str | None = None) -> None:
    """The command line of a GLiNER variant's reference encoder: ``scores(model, corpus)`` (the
    score tensors, ``--out`` and, in bf16, ``--bf16-out``) and ``cases(model, corpus)`` (the
    fp32 entity / relation lists, ``--entities``; also the bf16 ones, into ``bf16_cases``
    beside ``--bf16-out``, where named) of the checkpoint, which must load as ``model_class``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--entities", type=Path, help="the fp32 lists")
    ap.add_argument("--bf16-out", type=Path, help="also the bf16 score tensors, into this file")
    args = ap.parse_args()
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    model = load(args.checkpoint, "float32")
    if type(model).__name__ != model_class:
        raise SystemExit(f"{args.checkpoint} is a {type(model).__name__}, not a {model_class}")
    np.savez(args.out, **scores(model, corpus))
    if args.entities is not None:
        args.entities.write_text(json.dumps(cases(model, corpus), ensure_ascii=False), "utf-8")
    if args.bf16_out is not None:
        bf16 = load(args.checkpoint, "bfloat16")
        np.savez(args.bf16_out, **scores(bf16, corpus))
        if bf16_cases is not None:
            path = args.bf16_out.with_name(bf16_cases)
            path.write_text(json.dumps(cases(bf16, corpus), ensure_ascii=False), "utf-8")


def main() -> None:
    encode_main("UniEncoderTokenGLiNER", partial(score_arrays, scores=token_scores), entity_lists)


if __name__ == "__main__":
    main()
