"""Long GLiNER2 texts read in overlapping word windows, their results merged as gliner2's
``GLiNER2.extract_long`` merges them (pure Python, no vLLM).

The text is cut into windows of ``chunk_size`` words (the library's word splitter on the text
as given), each starting ``chunk_size - chunk_overlap`` words after the previous one; each
window is read as a text of its own (at most ``chunk_size`` words) and decoded with
confidences and offsets. The windows' results are then, in :func:`merge_windows`: moved to
document offsets (a span's text re-read from the document); merged key by key -- entity
types: their spans pooled and the highest-scoring set of non-overlapping spans kept (a
single-value type keeps its first span); relations, structure records and multi-label
classes: one of each (confidence aside), the most confident; a single-label classification:
the most confident window's label -- and finally shaped as the request asked
(``include_confidence`` / ``include_spans``). Relations are never formed across windows.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_factory.models.gliner2.prompts import word_pattern

DEFAULT_CHUNK_SIZE = 384  # words per window (extract_long's default)
DEFAULT_CHUNK_OVERLAP = 64  # words two neighbouring windows share (extract_long's default)
SPAN_KEYS = frozenset({"text", "confidence", "start", "end"})


@dataclass(frozen=True)
class Window:
    text: str
    start: int  # character offset of ``text`` in the document


def word_ends(text: str, limit: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of the text's words as given (no sentence end appended), at most ``limit``."""
    out = []
    for match in word_pattern().finditer(text):
        if limit is not None and len(out) >= limit:
            break
        out.append(match.span())
    return out


def split_windows(text: str, chunk_size: int, chunk_overlap: int) -> list[Window]:
    """Windows of ``chunk_size`` words, ``chunk_overlap`` words shared by neighbours; one
    window (the text itself) when it has no word."""
    words = word_ends(text)
    if not words:
        return [Window(text, 0)]
    step, out, first = chunk_size - chunk_overlap, [], 0
    while True:
        last = min(first + chunk_size, len(words)) - 1
        start, end = words[first][0], words[last][1]
        out.append(Window(text[start:end], start))
        if last == len(words) - 1:
            return out
        first += step


def fitted_overlap(size: int, overlap: int) -> int:
    """The overlap kept with windows of ``size`` words: as asked while below ``size``, else
    scaled from :data:`DEFAULT_CHUNK_SIZE` to ``size`` (always below ``size``)."""
    if overlap < size:
        return overlap
    return min(size - 1, overlap * size // DEFAULT_CHUNK_SIZE)


def smaller_size(words: int, tokens: int, limit: int, schema: int) -> int | None:
    """Words per window after a window of ``words`` words took ``tokens`` tokens (``schema`` of
    them the schema's, ``limit`` the most the server reads): shrunk in proportion to its text
    tokens, below ``words``; None when no window of at least one word can fit."""
    if limit <= schema or tokens <= schema or words <= 1:
        return None
    return max(1, min(words - 1, words * (limit - schema) // (tokens - schema)))


# -- merging --------------------------------------------------------------------------------------


def is_span(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "text" in value
        and isinstance(value.get("start"), int)
        and isinstance(value.get("end"), int)
    )


def is_label(value: Any) -> bool:
    return isinstance(value, dict) and "label" in value and "confidence" in value


def to_document(value: Any, document: str, offset: int) -> Any:
    """Every span of one window's result moved by ``offset``, its text read off ``document``."""
    if isinstance(value, list):
        return [to_document(item, document, offset) for item in value]
    if not isinstance(value, dict):
        return value
    moved = {key: to_document(item, document, offset) for key, item in value.items()}
    if is_span(moved):
        moved["start"] += offset
        moved["end"] += offset
        if 0 <= moved["start"] <= moved["end"] <= len(document):
            moved["text"] = document[moved["start"] : moved["end"]]
    return moved


def _in_order(maps: Iterable[Any]) -> list[str]:
    """The keys of the dictionaries among ``maps``, first seen first."""
    keys: dict[str, None] = {}
    for value in maps:
        if isinstance(value, dict):
            keys.update(dict.fromkeys(value))
    return list(keys)


def _listed(value: Any) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def _score(item: dict) -> float:
    return float(item.get("confidence", 0.0))


def _rank(row: tuple[int, dict]) -> tuple:
    index, item = row
    return (-_score(item), item["start"], item["end"], index)


def _best_disjoint(rows: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    """The non-overlapping rows of highest total score; equal totals: more rows, then the
    better-ranked set."""
    rows = sorted(rows, key=lambda r: (r[1]["end"], r[1]["start"], -_score(r[1]), r[0]))
    ends = [item["end"] for _, item in rows]

    def ranked(chosen: tuple[int, ...]) -> tuple:
        return tuple(sorted(_rank(rows[i]) for i in chosen))

    best: list[tuple[float, tuple[int, ...]]] = [(0.0, ())]  # best[i]: over the first i rows
    for i, (_, item) in enumerate(rows):
        before = bisect.bisect_right(ends, item["start"], 0, i)
        total, chosen = best[before]
        take = (total + _score(item), (*chosen, i))
        skip = best[i]
        if take[0] != skip[0]:
            best.append(take if take[0] > skip[0] else skip)
        elif len(take[1]) != len(skip[1]):
            best.append(take if len(take[1]) > len(skip[1]) else skip)
        else:
            best.append(take if ranked(take[1]) < ranked(skip[1]) else skip)
    return [rows[i] for i in best[-1][1]]


def _spans_kept(spans: list[dict], disjoint: bool) -> list[dict]:
    """One span per (start, end), the best-ranked; with ``disjoint`` the best set of
    non-overlapping ones; in document order."""
    seen: set[tuple[int, int]] = set()
    distinct = []
    for row in sorted(enumerate(spans), key=_rank):
        bounds = (row[1]["start"], row[1]["end"])
        if bounds not in seen:
            seen.add(bounds)
            distinct.append(row)
    kept = _best_disjoint(distinct) if disjoint else distinct
    items = [item for _, item in sorted(kept, key=_rank)]
    return sorted(items, key=lambda s: (s["start"], s["end"], s.get("text", "")))


def _identity(value: Any) -> Any:
    """What two predictions share when they are the same one, confidence aside."""
    if isinstance(value, dict):
        return (
            "d",
            tuple(sorted((k, _identity(v)) for k, v in value.items() if k != "confidence")),
        )
    if isinstance(value, list):
        return ("l", tuple(_identity(v) for v in value))
    return ("v", repr(value))


def _confidence_of(value: Any) -> float:
    if isinstance(value, dict) and isinstance(value.get("confidence"), (int, float)):
        return float(value["confidence"])
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return max((_confidence_of(v) for v in inner), default=0.0)


def _unique(items: list, disjoint: bool = False) -> list:
    """Spans (see :func:`_spans_kept`), then every other item once, its most confident copy."""
    spans = [item for item in items if is_span(item)]
    out = _spans_kept(spans, disjoint) if spans else []
    others: list = []
    where: dict[Any, int] = {}
    for item in items:
        if is_span(item):
            continue
        key = _identity(item)
        if key not in where:
            where[key] = len(others)
            others.append(item)
        elif _confidence_of(item) > _confidence_of(others[where[key]]):
            others[where[key]] = item
    return out + others


def _merge_entities(values: list, scalar: set[str]) -> dict:
    out = {}
    for label in _in_order(values):
        pooled = [
            item
            for value in values
            if isinstance(value, dict) and label in value
            for item in _listed(value[label])
        ]
        kept = _unique(pooled, disjoint=True)
        out[label] = (kept[0] if kept else None) if label in scalar else kept
    return out


def _merge_relations(values: list) -> dict:
    return {
        name: _unique(
            [item for v in values if isinstance(v, dict) and name in v for item in _listed(v[name])]
        )
        for name in _in_order(values)
    }


def _merge_value(values: list) -> Any:
    present = [v for v in values if v is not None and v != {} and v != []]
    if not present:
        return values[0] if values else None
    if all(is_label(v) for v in present):
        return max(present, key=lambda v: v.get("confidence", 0.0))
    if all(isinstance(v, str) for v in present):
        counts = Counter(present)
        return max(present, key=lambda v: (counts[v], -present.index(v)))
    if all(isinstance(v, list) for v in present):
        return _unique([item for v in present for item in v], disjoint=True)
    if all(isinstance(v, dict) for v in present):
        return {
            key: _merge_value([v[key] for v in present if key in v]) for key in _in_order(present)
        }
    return present[0]


def shaped(value: Any, confidence: bool, spans: bool) -> Any:
    """A merged result in the shape ``include_confidence`` / ``include_spans`` ask for."""
    if isinstance(value, list):
        return [shaped(item, confidence, spans) for item in value]
    if not isinstance(value, dict):
        return value
    if is_span(value):
        extra = {k: v for k, v in value.items() if k not in SPAN_KEYS}
        if not (confidence or spans or extra):
            return value.get("text", "")
        out: dict[str, Any] = {"text": value.get("text", "")}
        if confidence and "confidence" in value:
            out["confidence"] = value["confidence"]
        if spans:
            out["start"], out["end"] = value["start"], value["end"]
        return {**out, **extra}
    if is_label(value):
        return (
            {"label": value["label"], "confidence": value["confidence"]}
            if confidence
            else (value["label"])
        )
    if "text" in value and "confidence" in value and "start" not in value and "end" not in value:
        return (
            {"text": value["text"], "confidence": value["confidence"]}
            if confidence
            else (value["text"])
        )
    return {key: shaped(item, confidence, spans) for key, item in value.items()}


def merge_windows(
    document: str,
    windows: Sequence[Window],
    results: Sequence[dict],
    *,
    include_confidence: bool,
    include_spans: bool,
    scalar_entities: Iterable[str] = (),
) -> dict:
    """One document's result from its windows' results (each decoded with confidences and
    offsets); ``scalar_entities``: entity types of a single value."""
    moved = [to_document(r, document, w.start) for w, r in zip(windows, results, strict=True)]
    scalar = set(scalar_entities)
    merged: dict[str, Any] = {}
    for key in _in_order(moved):
        values = [r[key] for r in moved if key in r]
        if key == "entities":
            merged[key] = _merge_entities(values, scalar)
        elif key == "relation_extraction":
            merged[key] = _merge_relations(values)
        else:
            merged[key] = _merge_value(values)
    return shaped(merged, include_confidence, include_spans)
