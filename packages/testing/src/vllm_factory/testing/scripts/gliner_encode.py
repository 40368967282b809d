"""Reference outputs of the gliner library for the corpus (runs in the GLiNER venv).

    python gliner_encode.py --checkpoint DIR --corpus corpus.json --out ref.npz --entities ref.json \
        [--bf16-out ref-bf16.npz]

For every (label set, text): the token ids gliner feeds its encoder, the number of words it
scores, and the full sigmoid span x label score tensor [words, max_width, labels] (one text at a
time, as ``predict_entities`` runs it). For every threshold and decoding mode: the entity lists
of ``GLiNER.inference`` over the whole corpus (batch_size 8). For every label set and threshold
also the entities restricted to ``input_spans`` (:func:`mention_spans`: word-aligned spans and
misaligned ones that gliner drops), with ``class_probs``, as glinker's L3 / L4 ask for them.
``--bf16-out``: the score tensors again from a fresh bf16 copy of the model (gliner's own bf16
run, the GPU check's yardstick), in the same process (importing gliner costs more than the run).
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from tiny_checkpoint import script_parser

MODES = {
    "flat": {"flat_ner": True, "multi_label": False},
    "nested": {"flat_ner": False, "multi_label": False},
    "multi_label": {"flat_ner": True, "multi_label": True},
}


# gliner's whitespace splitter (the serving side has its own copy in vllm_factory's prompts).
WORDS = re.compile(r"\w+(?:[-_]\w+)*|\S")


def mention_spans(text: str, index: int) -> list[dict]:
    """Character spans like an L1 step's mentions: one to three words from every third word,
    plus a span one character off a word start (dropped by gliner); none for the seventh
    text."""
    if index == 6:
        return []
    words = [(m.start(), m.end()) for m in WORDS.finditer(text)]
    spans = []
    for i in range(0, len(words), 3):
        last = min(len(words) - 1, i + (i // 3) % 3)
        spans.append({"start": words[i][0], "end": words[last][1]})
    if len(words) > 1 and words[1][1] - words[1][0] > 1:
        spans.append({"start": words[1][0] + 1, "end": words[1][1]})
    return spans


@torch.no_grad()
def scores_for(model, text: str, labels: list[str]) -> tuple[np.ndarray, list[int], int]:
    prepared = model.prepare_batch([text], labels)
    batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
    output = model.run_batch(batch)
    probs = torch.sigmoid(output.logits[0]).float().numpy()
    ids = batch["input_ids"][0][batch["attention_mask"][0].bool()].tolist()
    return probs, ids, min(len(prepared["tokens"][0]), model.config.max_len)


def load(checkpoint: Path, dtype: str):
    from gliner import GLiNER

    torch.manual_seed(0)
    model = GLiNER.from_pretrained(str(checkpoint), local_files_only=True).eval()
    return model.to(getattr(torch, dtype))


def score_arrays(model, corpus: dict, scores=None) -> dict[str, np.ndarray]:
    """Token ids, scored words and scores of every (label set, text): ``scores(model, text,
    labels) -> (probs, ids, words)``, by default span x label (:func:`scores_for`)."""
    arrays: dict[str, np.ndarray] = {}
    for name, labels in corpus["label_sets"].items():
        for i, text in enumerate(corpus["texts"]):
            probs, ids, n_words = (scores or scores_for)(model, text, labels)
            arrays[f"scores_{name}_{i}"] = probs
            arrays[f"ids_{name}_{i}"] = np.asarray(ids, dtype=np.int64)
            arrays[f"words_{name}_{i}"] = np.asarray(n_words)
    return arrays


def entity_lists(model, corpus: dict) -> dict:
    """``GLiNER.inference`` per label set, decoding mode and threshold, and with input spans."""
    entities: dict = {"versions": {p: version(p) for p in ("gliner", "torch", "transformers")}}
    for name, labels in corpus["label_sets"].items():
        for mode, kwargs in MODES.items():
            for threshold in corpus["thresholds"]:
                result = model.inference(
                    corpus["texts"], labels, threshold=threshold, batch_size=8, **kwargs
                )
                entities[f"{name}/{mode}/{threshold}"] = [
                    [{k: e[k] for k in ("start", "end", "text", "label", "score")} for e in ents]
                    for ents in result
                ]
        spans = [mention_spans(text, i) for i, text in enumerate(corpus["texts"])]
        entities["input_spans"] = spans
        for threshold in corpus["thresholds"]:
            entities[f"{name}/input_spans/{threshold}"] = model.inference(
                corpus["texts"], labels, threshold=threshold, batch_size=8, input_spans=spans,
                return_class_probs=True,
            )  # fmt: skip
    return entities


def main() -> None:
    ap = script_parser(__doc__, "corpus")
    ap.add_argument("--entities", type=Path, help="entity lists (fp32 run only)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--bf16-out", type=Path, help="also the bf16 score tensors, into this file")
    args = ap.parse_args()
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    model = load(args.checkpoint, args.dtype)
    np.savez(args.out, **score_arrays(model, corpus))
    if args.entities is not None:
        entities = entity_lists(model, corpus)
        args.entities.write_text(json.dumps(entities, ensure_ascii=False), encoding="utf-8")
    if args.bf16_out is not None:
        np.savez(args.bf16_out, **score_arrays(load(args.checkpoint, "bfloat16"), corpus))


if __name__ == "__main__":
    main()
