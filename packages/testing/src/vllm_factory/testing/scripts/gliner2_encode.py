"""Reference outputs of the gliner2 library for the GLiNER2 cases (runs in the gliner2 venv).

    python gliner2_encode.py --checkpoint DIR --cases cases.json --out-results ref.json \
        --out-scores ref.npz [--dtype float32|bfloat16] [--adapter ADAPTER_DIR]

``--adapter``: the model with ``load_adapter(ADAPTER_DIR)`` (a LoRA adapter, before the cast).
Every case is run the way a user calls the library (one text per call, CPU):
``request["schema"]`` in ``Schema.from_dict`` form -> ``model.extract(text,
Schema.from_dict(schema), ...)``; in ``Schema().build()`` form (it has the builder's keys,
:data:`BUILD_KEYS`) -> ``model.extract(text, schema, ...)``; the short forms ``entities`` /
``classifications`` / ``structures`` / ``relations`` -> ``extract_entities`` / ``classify_text``
/ ``extract_json`` / ``extract_relations``; options ``threshold`` (default 0.5),
``include_confidence``, ``include_spans``, ``max_len``.

During that same call the library's own per-task scores are captured (:func:`capture` wraps
the model's ``_compute_direct_span_logits_batched`` and ``_compute_classification_probabilities``
on the instance) and written to the npz: ``<case>/span/<task>`` = sigmoid of the raw span logits
``[count, fields, words, max_width]`` (computed in the model's dtype, as the library thresholds
them, then float32; invalid spans 0.0; absent when the predicted count is 0),
``<case>/cls/<task>`` = the classification probabilities, ``<case>/input_ids`` = the encoder
input. ``<task>`` is the task's position in the prompt (the processor's order: structures,
entities, relations, classifications). The JSON holds, per case id: ``result`` (the library's
return value; tuples become lists), ``tasks`` ([{index, kind, name, count, prompt}]: kind is the
task type, name the library's own schema name, count the predicted count of span tasks,
prompt the schema tokens), ``text_tokens`` (the lower-cased words incl. any classification
prefix), ``num_text_tokens`` and ``num_words`` (words scored, after ``max_len``); and under
``"_meta"``: versions, dtype, and the Python types seen in results.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import torch

# Keys only a ``Schema().build()`` dict has (``build()`` always writes all of them).
BUILD_KEYS = frozenset({"json_structures", "json_descriptions", "entity_descriptions",
                        "relation_descriptions"})  # fmt: skip
SHORT_FORMS = {"entities": "extract_entities", "classifications": "classify_text",
               "structures": "extract_json", "relations": "extract_relations"}  # fmt: skip
OPTIONS = ("threshold", "include_confidence", "include_spans", "max_len")


def schema_name(prompt: list[str]) -> str:
    """The name the library gives a task's results (its prompt text before descriptions)."""
    return prompt[2].split(" [DESCRIPTION] ")[0]


def call_library(model, text: str, request: dict[str, Any]) -> Any:
    """The library call a user makes for ``request`` (the server's ``data`` minus text)."""
    from gliner2 import Schema

    options = {"threshold": request.get("threshold", 0.5),
               "include_confidence": request.get("include_confidence", False),
               "include_spans": request.get("include_spans", False),
               "max_len": request.get("max_len")}  # fmt: skip
    forms = [key for key in request if key not in OPTIONS]
    if len(forms) != 1:
        raise ValueError(f"exactly one of schema / a short form per request, got {forms}")
    form = forms[0]
    value = copy.deepcopy(request[form])
    if form == "schema":
        if BUILD_KEYS & value.keys():
            return model.extract(text, value, **options)
        return model.extract(text, Schema.from_dict(value), **options)
    return getattr(model, SHORT_FORMS[form])(text, value, **options)


@contextlib.contextmanager
def capture(model) -> Iterator[dict[str, Any]]:
    """Wrap the model's span-logit and classification-probability steps (on the instance)
    for one single-text call; yields the dict they fill: ``batch`` (the collated batch),
    ``token_embs`` (its word embeddings), ``span`` ({task: (raw logits or None, predicted count)}), ``cls`` ({task: probs})."""
    seen: dict[str, Any] = {"span": {}, "cls": {}}
    span_fn = model._compute_direct_span_logits_batched
    cls_fn = model._compute_classification_probabilities

    def span_logits(batch, *args, **kwargs):
        raw, counts = span_fn(batch, *args, **kwargs)
        assert len(batch) == 1, "one text per call"
        seen["batch"] = batch
        seen["token_embs"] = (args[0] if args else kwargs["all_token_embs"])[0]
        for task, kind in enumerate(batch.task_types[0]):
            if kind != "classifications":
                seen["span"][task] = (raw[0][task], int(counts[0][task]))
        return raw, counts

    def cls_probs(schema, embs, schema_tokens, *args, **kwargs):
        out = cls_fn(schema, embs, schema_tokens, *args, **kwargs)
        prompts = seen["batch"].schema_tokens_list[0]
        task = next((i for i, p in enumerate(prompts) if p is schema_tokens), None)
        if task is None:
            task = prompts.index(schema_tokens)
        if out is not None:
            seen["cls"][task] = out[2]
        return out

    model._compute_direct_span_logits_batched = span_logits
    model._compute_classification_probabilities = cls_probs
    try:
        yield seen
    finally:
        del model._compute_direct_span_logits_batched
        del model._compute_classification_probabilities


def plain(value: Any, types: set[str], path: str = "") -> Any:
    """``value`` as JSON data (tuples -> lists), noting each type by where it sits (``{}``: a
    dict value, ``[]``: a list or tuple item)."""
    types.add(f"{path}:{type(value).__name__}")
    if isinstance(value, dict):
        return {k: plain(v, types, path + "{}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, types, f"{path}[]") for v in value]
    return value


def run_case(model, case: dict) -> tuple[Any, dict[str, Any]]:
    """The library's result for ``case`` and what :func:`capture` saw during the call."""
    with capture(model) as seen:
        result = call_library(model, case["text"], case["request"])
    return result, seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--cases", required=True, type=Path)
    ap.add_argument("--out-results", required=True, type=Path)
    ap.add_argument("--out-scores", required=True, type=Path)
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "float64"), default="float32")
    ap.add_argument("--adapter", type=Path)
    args = ap.parse_args()
    from gliner2 import GLiNER2

    torch.manual_seed(0)
    model = GLiNER2.from_pretrained(str(args.checkpoint)).eval()
    if args.adapter is not None:
        model.load_adapter(str(args.adapter))
    if args.dtype != "float32":  # float64: the fp32 noise floor of the checkpoint
        model = model.to(getattr(torch, args.dtype))
    # The CPU path (per-sample decoding); the library's sync-collapsed decode is CUDA/MPS-only.
    assert next(model.parameters()).device.type == "cpu"
    model.sync_collapsed_decode = False
    cases = json.loads(args.cases.read_text(encoding="utf-8"))
    arrays: dict[str, np.ndarray] = {}
    types: set[str] = set()
    out: dict[str, Any] = {}
    for case in cases:
        cid = case["id"]
        result, seen = run_case(model, case)
        batch = seen["batch"]
        tasks = []
        for task, (kind, prompt) in enumerate(zip(batch.task_types[0],
                                                  batch.schema_tokens_list[0])):  # fmt: skip
            entry = {"index": task, "kind": kind, "name": schema_name(prompt)}
            if task in seen["span"]:
                raw, entry["count"] = seen["span"][task]
                if raw is not None:
                    probs = torch.sigmoid(raw).float()
                    arrays[f"{cid}/span/{task}"] = torch.where(
                        torch.isneginf(raw), torch.zeros_like(probs), probs
                    ).numpy()
            if task in seen["cls"]:
                arrays[f"{cid}/cls/{task}"] = seen["cls"][task].float().numpy()
            entry["prompt"] = list(prompt)
            tasks.append(entry)
        mask = batch.attention_mask[0].bool()
        arrays[f"{cid}/input_ids"] = batch.input_ids[0][mask].numpy().astype(np.int64)
        out[cid] = {"result": plain(result, types), "tasks": tasks,
                    "text_tokens": list(batch.text_tokens[0]),
                    "num_text_tokens": len(batch.text_tokens[0]),
                    "num_words": len(batch.start_mappings[0])}  # fmt: skip
    out["_meta"] = {"dtype": args.dtype, "adapter": args.adapter is not None,
                    "versions": {p: version(p) for p in ("gliner2", "torch", "transformers")},
                    "result_types": sorted(types)}  # fmt: skip
    np.savez(args.out_scores, **arrays)
    args.out_results.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n",
                                encoding="utf-8")  # fmt: skip


if __name__ == "__main__":
    main()
