"""Entity linking in the library's terms: candidates (id, label, description, ...) in, each
mention's linked candidate out, as glinker's L3 (linking) and L4 (reranking) layers compute
them with a GLiNER model; no vLLM import.

- A candidate's GLiNER label is ``template`` filled with the candidate's fields (glinker's
  schema template, default ``"{label}"``); a candidate that lacks a field the template names
  falls back to its ``label``. Labels equal up to case are one label: the first candidate that
  produced it is the one it links to (glinker's label -> candidate map).
- Without ``max_labels`` (L3): one GLiNER pass over all labels, entities kept at or above the
  threshold, sorted by start (stable).
- With ``max_labels`` (L4): the labels in chunks of ``max_labels``, one pass per chunk, the
  chunks' entities concatenated, one entity per (text, start, end) kept (the best score; it
  takes the place of the first one seen), then the threshold and the sort.

Each entity keeps gliner's fields (``class_probs`` included) and gains ``candidate_id`` and
``candidates``: the labels of ``class_probs`` as candidates, ``[{"id", "label", "score"}]``
best first.

vLLM Factory 0.2's form, ``labels`` with ``candidate_labels``: the types are one chunk, decoded as a
plain NER request; the candidate labels follow in chunks of their own (a uni-encoder's prompt
holds a bounded number of labels), scored for the same spans and never decoded. Each entity's
span then links to its best-scoring candidate label (:func:`link_spans`).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULT_TEMPLATE = "{label}"
_FORMATTER = string.Formatter()


@dataclass(frozen=True)
class LabelPlan:
    """A request's unique labels and the chunks they are scored in; when linking, the
    candidates (as dicts) and each label's candidate index."""

    labels: list[str]
    chunks: list[list[str]]
    candidates: list[dict] | None = None
    owner: dict[str, int] = field(default_factory=dict)
    # vLLM Factory 0.2's linking form: the chunks after the first hold candidate labels to link to.
    links_spans: bool = False

    @property
    def decoded_chunks(self) -> list[list[str]]:
        """The chunks whose spans become entities (the types alone when linking spans)."""
        return self.chunks[:1] if self.links_spans else self.chunks


def template_problem(template: str, max_chars: int | None = None) -> str | None:
    """Why ``template`` cannot be used (a message for a 400 on ``data.template``), or None.
    Only plain ``{field}`` placeholders: no attribute or index access, conversions or format
    specifications (a request must not reach into objects or ask for huge padding); at most
    ``max_chars`` characters (a label's own limit)."""
    if max_chars is not None and len(template) > max_chars:
        return f"data.template: at most {max_chars} characters, got {len(template)}"
    try:
        parts = list(_FORMATTER.parse(template))
    except ValueError as error:
        return f"data.template: {error}"
    fields = 0
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        fields += 1
        if not name.isidentifier() or spec or conversion:
            return (
                f"data.template: only plain {{field}} placeholders are allowed, got "
                f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
            )
    if not fields:
        return "data.template: needs at least one {field} placeholder, e.g. {label}"
    return None


class LabelTooLong(ValueError):
    """Candidate ``index``'s label from the template would hold ``length`` characters."""

    def __init__(self, index: int, length: int) -> None:
        super().__init__(f"candidate {index}: {length} characters")
        self.index, self.length = index, length


def label_length(template: str, candidate: Mapping[str, Any]) -> int:
    """The length of ``template`` filled with ``candidate`` (as :func:`candidate_labels` fills
    it), computed without building the string."""
    literal, fields = 0, []
    for text, name, _, _ in _FORMATTER.parse(template):
        literal += len(text)
        if name is not None:
            fields.append(name)
    if any(name not in candidate for name in fields):
        return len(candidate["label"])  # the fallback: the candidate's own label
    sizes: dict[str, int] = {}
    for name in fields:
        if name not in sizes:
            value = candidate[name]
            sizes[name] = len(value) if isinstance(value, str) else len(str(value))
    return literal + sum(sizes[name] for name in fields)


def candidate_labels(
    candidates: Sequence[Mapping[str, Any]],
    template: str = DEFAULT_TEMPLATE,
    max_chars: int | None = None,
) -> tuple[list[str], dict[str, int]]:
    """The GLiNER labels of ``candidates`` (first-occurrence order, unique up to case) and
    each label's candidate (index into ``candidates``). ``LabelTooLong`` for a candidate whose
    label would exceed ``max_chars``, before that label (or any later one) is built."""
    labels: list[str] = []
    owner: dict[str, int] = {}
    seen: set[str] = set()
    for index, candidate in enumerate(candidates):
        if max_chars is not None:
            length = label_length(template, candidate)
            if length > max_chars:
                raise LabelTooLong(index, length)
        try:
            label = template.format_map(candidate)
        except (KeyError, IndexError):
            label = candidate["label"]
        if label.lower() not in seen:
            seen.add(label.lower())
            labels.append(label)
            owner[label] = index
    return labels, owner


def chunked(labels: Sequence[str], max_labels: int | None) -> list[list[str]]:
    """``labels`` in chunks of ``max_labels`` (one chunk without a limit)."""
    if not max_labels or len(labels) <= max_labels:
        return [list(labels)]
    return [list(labels[i : i + max_labels]) for i in range(0, len(labels), max_labels)]


def merge_chunks(per_chunk: Sequence[list[dict]], threshold: float, rerank: bool) -> list[dict]:
    """One text's entities from its chunks' entities (see the module docstring)."""
    entities = [entity for chunk in per_chunk for entity in chunk]
    if rerank:
        best: dict[tuple, dict] = {}
        for entity in entities:
            key = (entity["text"], entity["start"], entity["end"])
            if key not in best or entity["score"] > best[key]["score"]:
                best[key] = entity
        entities = list(best.values())
    entities = [entity for entity in entities if entity["score"] >= threshold]
    return sorted(entities, key=lambda entity: entity["start"])


def link(
    entities: list[dict], candidates: Sequence[Mapping[str, Any]], owner: Mapping[str, int]
) -> list[dict]:
    """``entities`` with ``candidate_id`` and ranked ``candidates`` added."""
    for entity in entities:
        entity["candidate_id"] = candidates[owner[entity["label"]]]["id"]
        ranked = sorted((entity.get("class_probs") or {}).items(), key=lambda kv: -kv[1])
        entity["candidates"] = [
            {"id": candidates[owner[label]]["id"], "label": label, "score": score}
            for label, score in ranked
        ]
    return entities


def link_spans(
    entities: list[dict],
    cells: Sequence[np.ndarray],
    candidate_labels: Sequence[str],
    threshold: float,
) -> list[dict]:
    """vLLM Factory 0.2's linking: each entity (its span's score row over the candidate labels in
    ``cells``, one per entity) gains ``linked_to``, the best candidate label (null below
    ``threshold``), and ``linked_score``, its score. Ties go to the first candidate."""
    for entity, row in zip(entities, cells):
        best = int(np.argmax(row))
        score = float(row[best])
        entity["linked_to"] = candidate_labels[best] if score >= threshold else None
        entity["linked_score"] = score
    return entities
