"""Reference outputs of the gliner library for the corpus (runs in the GLiNER venv).

    python gliner_encode.py --checkpoint DIR --corpus corpus.json --out ref.npz --entities ref.json

For every (label set, text): the token ids gliner feeds its encoder, the number of words it
scores, and the full sigmoid span x label score tensor [words, max_width, labels] (one text at a
time, as ``predict_entities`` runs it). For every threshold and decoding mode: the entity lists
of ``GLiNER.inference`` over the whole corpus (batch_size 8).
"""

from __future__ import annotations

import argparse
import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

MODES = {
    "flat": {"flat_ner": True, "multi_label": False},
    "nested": {"flat_ner": False, "multi_label": False},
    "multi_label": {"flat_ner": True, "multi_label": True},
}


@torch.no_grad()
def scores_for(model, text: str, labels: list[str]) -> tuple[np.ndarray, list[int], int]:
    prepared = model.prepare_batch([text], labels)
    batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
    output = model.run_batch(batch)
    probs = torch.sigmoid(output.logits[0]).float().numpy()
    ids = batch["input_ids"][0][batch["attention_mask"][0].bool()].tolist()
    return probs, ids, min(len(prepared["tokens"][0]), model.config.max_len)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--entities", type=Path, help="entity lists (fp32 run only)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = ap.parse_args()
    from gliner import GLiNER

    torch.manual_seed(0)
    model = GLiNER.from_pretrained(str(args.checkpoint), local_files_only=True).eval()
    model = model.to(getattr(torch, args.dtype))
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    arrays: dict[str, np.ndarray] = {}
    entities: dict = {"versions": {p: version(p) for p in ("gliner", "torch", "transformers")}}
    for name, labels in corpus["label_sets"].items():
        for i, text in enumerate(corpus["texts"]):
            probs, ids, n_words = scores_for(model, text, labels)
            arrays[f"scores_{name}_{i}"] = probs
            arrays[f"ids_{name}_{i}"] = np.asarray(ids, dtype=np.int64)
            arrays[f"words_{name}_{i}"] = np.asarray(n_words)
        if args.entities is None:
            continue
        for mode, kwargs in MODES.items():
            for threshold in corpus["thresholds"]:
                result = model.inference(
                    corpus["texts"], labels, threshold=threshold, batch_size=8, **kwargs
                )
                entities[f"{name}/{mode}/{threshold}"] = [
                    [{k: e[k] for k in ("start", "end", "text", "label", "score")} for e in ents]
                    for ents in result
                ]
    np.savez(args.out, **arrays)
    if args.entities is not None:
        args.entities.write_text(json.dumps(entities, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
