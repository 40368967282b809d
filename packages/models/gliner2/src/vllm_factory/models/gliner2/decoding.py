"""Span scores and class logits -> the result ``GLiNER2.extract`` returns (pure Python and
NumPy; runs in vLLM's API process).

Follows the library's span-architecture decoder: spans at or above the threshold (compared in
float32, as the library compares its float32 tensors), highest confidence first, overlapping
spans dropped greedily; per-entity / per-field / per-relation thresholds and ``dtype`` where
the schema form carries them; choice fields read off the choice words before the text;
classification by softmax or sigmoid; then the library's result formatting (duplicate removal,
``include_confidence`` / ``include_spans`` shapes, ``relation_extraction`` grouping).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from vllm_factory.heads.gliner.decoding import TooManyCandidates
from vllm_factory.models.gliner2.prompts import Prompt, Task
from vllm_factory.models.gliner2.schema import SchemaPlan

Span = tuple[str, float, int, int]  # text, confidence, char start, char end


@dataclass
class TaskScores:
    task: Task
    count: int  # predicted instances (span tasks)
    scores: np.ndarray | None  # [instances, fields, text tokens, max_width] float32
    logits: np.ndarray | None  # [labels] (classifications)
    probs: np.ndarray | None = None  # [labels], set when decoded


def split_output(vector: np.ndarray, prompt: Prompt, max_width: int) -> list[TaskScores]:
    """The head's flat float32 vector -> one :class:`TaskScores` per task."""
    tasks = prompt.tasks
    counts = [round(float(c)) for c in vector[: len(tasks)]]
    at = len(tasks)
    n_tokens = len(prompt.text_tokens)
    out = []
    for task, count in zip(tasks, counts):
        scores = None
        if task.kind != "classifications" and count > 0:
            used = 1 if task.kind == "entities" else min(count, 20)
            size = used * len(task.fields) * n_tokens * max_width
            scores = vector[at : at + size].reshape(used, len(task.fields), n_tokens, max_width)
            at += size
        out.append(TaskScores(task, count, scores, None))
    for item in out:
        if item.task.kind == "classifications":
            n = len(item.task.fields)
            item.logits = vector[at : at + n]
            at += n
    if at != len(vector):
        raise ValueError(f"GLiNER2 output of {len(vector)} values, expected {at}")
    return out


# -- spans ------------------------------------------------------------------------------------------


class CandidateBudget:
    """How many spans above their thresholds a request may still turn into Python objects."""

    def __init__(self, limit: int) -> None:
        self.limit = self.left = limit

    def take(self, count: int) -> None:
        if count > self.left:
            raise TooManyCandidates(count)
        self.left -= count


def find_spans(
    scores: np.ndarray,
    threshold: float,
    n_words: int,
    prompt: Prompt,
    budget: CandidateBudget | None = None,
) -> list[Span]:
    """Spans of one [words, max_width] score grid at or above ``threshold``, in grid order;
    counted against ``budget`` before any is made."""
    words = prompt.words
    above = scores >= np.float32(threshold)
    if budget is not None:
        budget.take(int(np.count_nonzero(above)))
    starts, widths = np.nonzero(above)
    spans = []
    for start, width in zip(starts.tolist(), widths.tolist()):
        end = start + width + 1
        if end > n_words:
            continue
        char_start, char_end = words.starts[start], words.ends[end - 1]
        text = words.text[char_start:char_end].strip()
        if text:
            spans.append((text, float(scores[start, width]), char_start, char_end))
    return spans


def greedy(spans: list[Span], dtype: str = "list") -> list[Span]:
    """Highest confidence first (stable), dropping spans that overlap a kept one. Kept spans
    never overlap, so a span overlaps one iff a character it covers is marked taken: one look
    at its own characters, not at every kept span."""
    kept: list[Span] = []
    taken = bytearray(max((span[3] for span in spans), default=0))
    for span in sorted(spans, key=lambda s: s[1], reverse=True):
        start, end = span[2], span[3]
        if taken.find(1, start, end) < 0:
            kept.append(span)
            taken[start:end] = b"\x01" * (end - start)
    return kept if dtype == "list" else kept[:1]


def span_value(span: Span, confidence: bool, offsets: bool) -> Any:
    text, conf, start, end = span
    if confidence and offsets:
        return {"text": text, "confidence": conf, "start": start, "end": end}
    if offsets:
        return {"text": text, "start": start, "end": end}
    if confidence:
        return {"text": text, "confidence": conf}
    return text


def span_list(spans: list[Span], confidence: bool, offsets: bool) -> list:
    return [span_value(s, confidence, offsets) for s in spans]


# -- tasks ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    threshold: float
    include_confidence: bool
    include_spans: bool
    budget: CandidateBudget | None = None


def entities(item: TaskScores, plan: SchemaPlan, prompt: Prompt, opt: Options) -> list:
    names = item.task.fields
    if item.count <= 0 or item.scores is None:
        return []
    n_words = len(prompt.words.tokens)
    grid = item.scores[0, :, -n_words:]
    out: dict[str, Any] = {}
    for name in plan.entity_order or names:
        if name not in names:
            continue
        meta = plan.entity_metadata.get(name, {})
        threshold = meta.get("threshold")
        threshold = opt.threshold if threshold is None else float(threshold)
        dtype = meta.get("dtype", "list")
        spans = greedy(
            find_spans(grid[names.index(name)], threshold, n_words, prompt, opt.budget), dtype
        )
        if dtype == "list":
            out[name] = span_list(spans, opt.include_confidence, opt.include_spans)
        elif spans:
            out[name] = span_value(spans[0], opt.include_confidence, opt.include_spans)
        else:
            out[name] = None if (opt.include_spans or opt.include_confidence) else ""
    return [out] if out else []


def relations(item: TaskScores, plan: SchemaPlan, prompt: Prompt, opt: Options) -> list:
    name, fields = item.task.name, item.task.fields
    if item.count <= 0 or item.scores is None:
        return []
    threshold = opt.threshold
    if name in plan.relation_metadata:
        given = plan.relation_metadata[name].get("threshold")
        threshold = threshold if given is None else given
    order = plan.field_orders.get(name, fields)
    n_words = len(prompt.words.tokens)
    out = []
    for instance in range(min(item.count, 20)):
        grid = item.scores[instance, :, -n_words:]
        found: list[Span | None] = []
        for field in order:
            if field not in fields:
                continue
            spans = greedy(
                find_spans(grid[fields.index(field)], threshold, n_words, prompt, opt.budget)
            )
            found.append(spans[0] if spans else None)
        if len(found) == 2 and found[0] and found[1]:
            head, tail = found
            if opt.include_spans or opt.include_confidence:
                out.append({
                    "head": _relation_end(head, opt), "tail": _relation_end(tail, opt)
                })  # fmt: skip
            else:
                out.append((head[0], tail[0]))
    return out


def _relation_end(span: Span, opt: Options) -> dict:
    text, conf, start, end = span
    if opt.include_spans and opt.include_confidence:
        return {"text": text, "confidence": conf, "start": start, "end": end}
    if opt.include_spans:
        return {"text": text, "start": start, "end": end}
    return {"text": text, "confidence": conf}


def choice_index(choice: str, tokens: Sequence[str]) -> int:
    lowered = choice.lower()
    for i, token in enumerate(tokens):
        if token.lower() == lowered:
            return i
    return -1


def structures(item: TaskScores, plan: SchemaPlan, prompt: Prompt, opt: Options,
               choice_fields: dict[str, list[str]]) -> list | dict:  # fmt: skip
    name, fields = item.task.name, item.task.fields
    if item.count <= 0 or item.scores is None:
        return {}  # the library answers a structure predicted absent with {}, not []
    n_words = len(prompt.words.tokens)
    prefix_tokens = prompt.text_tokens[:-n_words]
    order = plan.field_orders.get(name, fields)
    out = []
    for instance in range(min(item.count, 20)):
        grid = item.scores[instance, :, -n_words:]
        record: dict[str, Any] = {}
        for field in order:
            if field not in fields:
                continue
            index = fields.index(field)
            key = f"{name}.{field}"
            meta = plan.field_metadata.get(key, {})
            threshold = meta.get("threshold")
            threshold = opt.threshold if threshold is None else threshold
            dtype = meta.get("dtype", "list")
            if key in choice_fields:
                prefix = item.scores[instance, index, :-n_words]
                record[field] = _choices(
                    choice_fields[key], prefix, prefix_tokens, threshold, dtype, opt
                )
                continue
            spans = greedy(find_spans(grid[index], threshold, n_words, prompt, opt.budget), dtype)
            if dtype == "list":
                record[field] = span_list(spans, opt.include_confidence, opt.include_spans)
            elif spans:
                record[field] = span_value(spans[0], opt.include_confidence, opt.include_spans)
            else:
                record[field] = None
        if any(v is not None and v != [] for v in record.values()):
            out.append(record)
    return out


def _choices(choices: list[str], prefix: np.ndarray, tokens: Sequence[str], threshold: float,
             dtype: str, opt: Options) -> Any:  # fmt: skip
    # The library compares these as Python floats (``.item()``), not as float32 tensors.
    if dtype == "list":
        selected, seen = [], set()
        for choice in choices:
            if choice in seen:
                continue
            i = choice_index(choice, tokens)
            if 0 <= i < prefix.shape[0] and float(prefix[i, 0]) >= threshold:
                score = float(prefix[i, 0])
                selected.append({"text": choice, "confidence": score} if opt.include_confidence
                                else choice)  # fmt: skip
                seen.add(choice)
        return selected
    best, best_score = None, -1.0
    for choice in choices:
        i = choice_index(choice, tokens)
        if 0 <= i < prefix.shape[0]:
            score = float(prefix[i, 0])
            if score > best_score:
                best, best_score = choice, score
    if best and best_score >= threshold:
        return {"text": best, "confidence": best_score} if opt.include_confidence else best
    return None


def classification(item: TaskScores, plan: SchemaPlan) -> tuple[str, Any] | None:
    """(task name, result) as the library's classification decoder gives them."""
    prompt_text = item.task.items[2]
    config = owning_classification(prompt_text, plan.schema.get("classifications", []))
    if config is None:
        return None
    logits = item.logits.astype(np.float32)  # type: ignore[union-attr]
    activation = config.get("class_act", "auto")
    multi = config.get("multi_label", False)
    if activation == "sigmoid" or (activation != "softmax" and multi):
        probs = 1.0 / (1.0 + np.exp(-logits))
    else:
        shifted = np.exp(logits - logits.max())
        probs = shifted / shifted.sum()
    probs = probs.astype(np.float32)
    item.probs = probs
    labels = config["labels"]
    if multi:
        limit = config.get("cls_threshold", 0.5)  # compared as Python floats, as the library does
        chosen = [
            (labels[j], float(probs[j])) for j in range(len(labels)) if float(probs[j]) >= limit
        ]
        if not chosen:
            best = int(np.argmax(probs))
            chosen = [(labels[best], float(probs[best]))]
        if config.get("top_k") is not None:
            chosen = sorted(chosen, key=lambda pair: pair[1], reverse=True)[: config["top_k"]]
        return config["task"], chosen
    best = int(np.argmax(probs))
    return config["task"], (labels[best], float(probs[best]))


def owning_classification(prompt_text: str, configs: Sequence[dict]) -> dict | None:
    """The classification whose task name starts the prompt text (the longest such)."""
    best = None
    for config in configs:
        task = config.get("task", "")
        if not task or not prompt_text.startswith(task):
            continue
        rest = prompt_text[len(task) :]
        separated = rest == "" or rest[0] in (":", " ")
        if separated and (best is None or len(task) > len(best.get("task", ""))):
            best = config
    if best is None:
        best = next((c for c in configs if prompt_text.startswith(c.get("task", ""))), None)
    return best


def extract(items: Sequence[TaskScores], plan: SchemaPlan, prompt: Prompt, opt: Options) -> dict:
    """The unformatted per-task results (``_extract_sample``)."""
    choice_fields = {
        f"{parent}.{name}": value["choices"]
        for item in plan.schema.get("json_structures", [])
        for parent, fields in item.items()
        for name, value in fields.items()
        if isinstance(value, dict) and "choices" in value
    }
    results: dict[str, Any] = {}
    for item in items:
        name = item.task.name
        if item.task.kind == "classifications":
            decided = classification(item, plan)
            if decided is not None:
                results[decided[0]] = decided[1]
        elif name == "entities":
            results[name] = entities(item, plan, prompt, opt)
        elif item.task.kind == "relations":
            results[name] = relations(item, plan, prompt, opt)
        else:
            results[name] = structures(item, plan, prompt, opt, choice_fields)
    return results


# -- formatting (the library's format_results) -----------------------------------------------------


def _is_score(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _format_classification(value: Any, confidence: bool) -> Any:
    if isinstance(value, (list, tuple)) and value:
        first = value[0]
        if isinstance(first, (list, tuple)):
            if confidence:
                return [{"label": v[0], "confidence": v[1]} for v in value]
            return [v[0] for v in value]
        if len(value) == 2 and isinstance(first, str) and _is_score(value[1]):
            return {"label": value[0], "confidence": value[1]} if confidence else value[0]
    return value


def _dedupe(values: Any, confidence: bool) -> Any:
    """One field's or entity type's values without repeats (case-insensitive)."""
    if isinstance(values, list):
        unique, seen = [], set()
        for v in values:
            if isinstance(v, tuple):
                text, conf, start, end = v
                key = (text.lower(), start, end)
                if text and key not in seen:
                    seen.add(key)
                    unique.append({"text": text, "confidence": conf} if confidence else text)
            elif isinstance(v, dict):
                text = v.get("text", "")
                if "start" in v and "end" in v:
                    key = (text.lower(), v["start"], v["end"])
                else:
                    key = (text.lower(), None, None)
                if text and key not in seen:
                    seen.add(key)
                    unique.append(v)
            elif v and v.lower() not in seen:
                seen.add(v.lower())
                unique.append(v)
        return unique
    return values


def _format_values(values: dict, confidence: bool) -> dict:
    """An entity-type map or a record: lists without repeats, empty values as None (the
    library's ``format_entity_dict`` and ``format_struct``, which do the same here)."""
    out = {}
    for name, value in values.items():
        if isinstance(value, list):
            out[name] = _dedupe(value, confidence)
        elif isinstance(value, tuple):
            text, conf = value[0], value[1]
            out[name] = {"text": text, "confidence": conf} if confidence and text else text
        else:
            out[name] = value or None
    return out


def format_results(results: dict, plan: SchemaPlan, confidence: bool) -> dict:
    """The library's ``format_results``: the public payload of one text."""
    formatted: dict[str, Any] = {}
    grouped: dict[str, Any] = {}
    requested = plan.relation_order
    classes = plan.classification_tasks
    for key, value in results.items():
        is_class = key in classes
        is_relation = False
        if not is_class:
            if key in requested:
                is_relation = True
            elif isinstance(value, list) and value:
                first = value[0]
                if (
                    isinstance(first, tuple)
                    and len(first) == 2
                    or isinstance(first, dict)
                    and "head" in first
                    and "tail" in first
                ):
                    is_relation = True
        if is_class:
            formatted[key] = _format_classification(value, confidence)
        elif is_relation:
            grouped[key] = value if isinstance(value, list) else []
        elif isinstance(value, list):
            if not value:
                formatted[key] = {} if key == "entities" else value
            elif isinstance(value[0], dict):
                if key == "entities":
                    formatted[key] = _format_values(value[0], confidence)
                else:
                    formatted[key] = [_format_values(v, confidence) for v in value]
            elif isinstance(value[0], tuple):
                formatted[key] = (
                    [{"label": lab, "confidence": c} for lab, c in value]
                    if confidence
                    else [lab for lab, _ in value]
                )
            else:
                formatted[key] = value
        elif isinstance(value, tuple):
            label, conf = value
            formatted[key] = {"label": label, "confidence": conf} if confidence else label
        elif isinstance(value, dict):
            formatted[key] = _format_values(value, confidence)
        else:
            formatted[key] = value
    for name in requested:
        grouped.setdefault(name, [])
    if grouped:
        formatted["relation_extraction"] = grouped
    return formatted


def to_json(value: Any) -> Any:
    """Tuples as lists (what the library's tuples become in JSON)."""
    if isinstance(value, tuple | list):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value
