"""Reference outputs of gliner's relex model for the corpus (runs in the gliner venv):

    python gliner_relex_encode.py --checkpoint DIR --corpus corpus.json --out ref.npz \
        --entities ref.json [--bf16-out ref-bf16.npz]

As ``gliner_encode.py`` for span models: the span x label score tensors of every (label set,
text) with no relation labels (what an entity-only request on a relex checkpoint reads), and
in ``--entities`` the relation cases: each case's ``predict_relations`` arguments (entity
labels, relation labels, thresholds, decoding mode) and, per corpus text, its entities and
relations as ``predict_relations`` returns them (one text at a time), and how close to its
threshold the nearest adjacency and relation score of the model's kept pairs came
(``closest``: what may decide a relation either way at another rounding). ``--bf16-out``: the
score tensors and the cases' results again from a bf16 copy of the model (``ref-relex-bf16``
beside it, the GPU check's yardstick).
"""

from __future__ import annotations

from importlib.metadata import version

import torch
from gliner_encode import score_arrays
from gliner_relex_checkpoint import ENTITY_LABELS, RELATIONS
from gliner_token_encode import encode_main

ENTITY_KEYS = ("start", "end", "text", "label", "score")
# predict_relations arguments per case (threshold 0.0 for relations: every kept pair's score).
CASES = {
    "flat/0.5": {"threshold": 0.5},
    "flat/0.3": {"threshold": 0.3},
    "nested/0.3": {"threshold": 0.3, "flat_ner": False},
    "multi_label/0.3": {"threshold": 0.3, "multi_label": True},
    "relation_threshold/0.7": {"threshold": 0.3, "relation_threshold": 0.7},
    "adjacency/0.8": {"threshold": 0.3, "adjacency_threshold": 0.8, "relation_threshold": 0.4},
    "all_pairs/0.5": {"threshold": 0.5, "relation_threshold": 0.0},
}


def closest(outputs: list, adjacency: list, kwargs: dict) -> dict:
    """The smallest distance of an adjacency (off the diagonal) and of a kept pair's relation
    score from their thresholds, in the text's forward pass (None where there was none)."""
    threshold = kwargs["threshold"]
    out = {"adjacency": None, "relation": None}
    if adjacency and adjacency[-1].shape[-1] > 1:
        values = adjacency[-1][0]
        off = ~torch.eye(values.shape[0], dtype=torch.bool)
        gap = (values[off].float() - kwargs.get("adjacency_threshold", threshold)).abs()
        out["adjacency"] = float(gap.min())
    last = outputs[-1]
    if last.rel_logits is not None and last.rel_mask is not None and last.rel_mask.any():
        probs = torch.sigmoid(last.rel_logits[0][last.rel_mask[0].bool()].float())
        if probs.numel():
            gap = (probs - kwargs.get("relation_threshold", threshold)).abs()
            out["relation"] = float(gap.min())
    return out


def relex_cases(model, corpus: dict) -> dict:
    labels = corpus["label_sets"][ENTITY_LABELS]
    out: dict = {
        "versions": {p: version(p) for p in ("gliner", "torch", "transformers")},
        "labels": labels,
        "relations": RELATIONS,
        "cases": {},
    }
    outputs: list = []
    adjacency: list = []
    hooks = [model.model.register_forward_hook(lambda _m, _a, out: outputs.append(out))]
    layer = getattr(model.model, "relations_rep_layer", None)
    if layer is not None:
        hooks.append(layer.register_forward_hook(lambda _m, _a, out: adjacency.append(out)))
    for name, kwargs in CASES.items():
        results = []
        for text in corpus["texts"]:
            outputs.clear()
            adjacency.clear()
            entities, relations = model.predict_relations(text, labels, RELATIONS, **kwargs)
            results.append(
                {
                    "closest": closest(outputs, adjacency, kwargs),
                    "entities": [{k: e[k] for k in ENTITY_KEYS} for e in entities],
                    "relations": [
                        {k: r[k] for k in ("head", "tail", "relation", "score")} for r in relations
                    ],
                }
            )
        out["cases"][name] = {"arguments": kwargs, "results": results}
    for hook in hooks:
        hook.remove()
    return out


def main() -> None:
    encode_main("UniEncoderSpanRelexGLiNER", score_arrays, relex_cases, "ref-relex-bf16.json")


if __name__ == "__main__":
    main()
