"""Span scores -> entities, as gliner's span decoder does it; no vLLM import.

Candidates are the (start, width, label) cells above the threshold whose span ends inside the
text, in row-major order; they are ranked by score (stable, so ties keep that order) and kept
greedily unless they clash with a kept span: flat NER forbids any overlap, nested NER only
partial overlap; the same span twice is a clash unless ``multi_label``. Kept spans are sorted
by start (stable) and mapped to character offsets of the original text.

Selecting and ranking candidates is vectorised (numpy); the greedy pass checks a flat-NER
candidate against a per-word occupancy map (at most ``max_width`` words), not every kept span.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from vllm_factory.heads.gliner.prompts import Word


class UnscoredText(RuntimeError):
    """The engine returned no scores for a text (its prompt's word layout did not reach the
    head, which then scores nothing rather than raise inside the engine)."""


def checked_scores(scores: torch.Tensor, num_words: int, index: int) -> torch.Tensor:
    """``scores`` of text ``index`` if they cover its ``num_words`` words, else an error for
    this request alone."""
    rows = scores.shape[0] if scores.dim() == 3 else 0
    if rows != num_words:
        raise UnscoredText(
            f"data.text[{index}]: the model returned scores for {rows} of {num_words} words "
            "(the prompt's word layout did not reach the engine)"
        )
    return scores


class Candidate(NamedTuple):
    start: int  # word indices, end inclusive
    end: int
    label: int
    score: float


def _partial_overlap(a: Candidate, b: Candidate) -> bool:
    """Overlapping, neither inside the other: what nested NER forbids."""
    disjoint = a.start > b.end or b.start > a.end
    nested = (a.start <= b.start and a.end >= b.end) or (b.start <= a.start and b.end >= a.end)
    return not (disjoint or nested)


def decode_spans(
    scores: torch.Tensor,
    num_words: int,
    threshold: float,
    flat_ner: bool = True,
    multi_label: bool = False,
) -> list[Candidate]:
    """Kept spans of one text from its ``[num_words, max_width, num_labels]`` scores."""
    cells = scores.numpy()
    starts, widths, labels = np.nonzero(cells > threshold)  # row-major, like torch.where
    values = cells[starts, widths, labels]
    inside = starts + widths < num_words
    starts, widths, labels, values = starts[inside], widths[inside], labels[inside], values[inside]
    order = np.argsort(-values, kind="stable")  # best first; ties keep row-major order
    ranked = zip(
        starts[order].tolist(),
        (starts + widths)[order].tolist(),
        labels[order].tolist(),
        values[order].tolist(),
    )
    kept: list[Candidate] = []
    kept_spans: set[tuple[int, int]] = set()
    taken = bytearray(num_words)  # flat NER: words covered by a kept span
    for start, end, label, score in ranked:
        if (start, end) in kept_spans:
            # The same span again: a clash unless multi-label. Every other kept span is
            # disjoint from (flat) or nested with (nested) it already.
            if not multi_label:
                continue
        elif flat_ner:
            if any(taken[start : end + 1]):
                continue
            taken[start : end + 1] = b"\x01" * (end + 1 - start)
        else:
            cand = Candidate(start, end, label, score)
            if any(_partial_overlap(cand, other) for other in kept):
                continue
        kept.append(Candidate(start, end, label, score))
        kept_spans.add((start, end))
    kept.sort(key=lambda cand: cand.start)
    return kept


def to_entities(
    spans: Sequence[Candidate], words: Sequence[Word], labels: Sequence[str], text: str
) -> list[dict]:
    entities = []
    for span in spans:
        start, end = words[span.start].start, words[span.end].end
        entities.append(
            {
                "start": start,
                "end": end,
                "text": text[start:end],
                "label": labels[span.label],
                "score": span.score,
            }
        )
    return entities
