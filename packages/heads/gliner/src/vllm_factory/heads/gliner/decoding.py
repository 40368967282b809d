"""Span scores -> entities, as gliner's span decoder does it; no vLLM import.

Candidates are the (start, width, label) cells above the threshold whose span ends inside the
text, in row-major order; they are ranked by score (stable, so ties keep that order) and kept
greedily unless they clash with a kept span: flat NER forbids any overlap, nested NER only
partial overlap; the same span twice is a clash unless ``multi_label``. Kept spans are sorted
by start (stable) and mapped to character offsets of the original text.

Selecting and ranking candidates is vectorised (numpy); the greedy pass checks a candidate
against per-word maps of the kept spans (at most ``max_width`` words each), not every kept span:
flat NER against the words they cover, nested NER against the farthest end of the kept spans
starting at each word and the nearest start of those ending at each word.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import torch
from vllm_factory.heads.gliner.prompts import TextWords, Word


class UnscoredText(ValueError):
    """The engine returned no scores for a text: its prompt reached the engine changed (vLLM
    applies a request's top-level ``truncate_prompt_tokens`` / ``truncation_side`` to the
    IOProcessor's prompts), so its word layout no longer fits and the head scored nothing
    rather than raise inside the engine. The request's own doing: a 400."""


class TooManyCandidates(ValueError):
    """More spans above a request's threshold than it may keep (``count`` of them)."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} candidate spans")
        self.count = count


class KeptSpans(list):
    """The spans :func:`decode_spans` keeps (:class:`Candidate`, by start) and ``candidates``,
    how many above the threshold it ranked to choose them."""

    candidates: int = 0


def checked_scores(scores: torch.Tensor, num_words: int, index: int) -> torch.Tensor:
    """``scores`` of text ``index`` if they cover its ``num_words`` words, else an error for
    this request alone."""
    rows = scores.shape[0] if scores.dim() == 3 else 0
    if rows != num_words:
        raise UnscoredText(
            f"the model scored {rows} of the text's {num_words} words: its prompt reached the "
            "engine changed (truncate_prompt_tokens and truncation_side do not apply to GLiNER "
            "requests)"
        )
    return scores


class Candidate(NamedTuple):
    start: int  # word indices, end inclusive
    end: int
    label: int
    score: float


def span_filter(spans: Sequence[tuple[int, int]], num_words: int, max_width: int) -> np.ndarray:
    """``[num_words, max_width]`` True at the given (first word, last word) spans, as gliner's
    ``input_spans`` mask: spans past the text or wider than ``max_width`` select nothing."""
    allowed = np.zeros((num_words, max_width), dtype=bool)
    for first, last in spans:
        width = last - first
        if 0 <= width < max_width and 0 <= first < num_words:
            allowed[first, width] = True
    return allowed


def word_spans(spans: Sequence[tuple[int, int]], words: Sequence[Word]) -> list[tuple[int, int]]:
    """Character spans -> (first word, last word), as gliner converts ``input_spans``: a span
    must start where a word starts and end where a word ends, else it is dropped."""
    starts = {word.start: i for i, word in enumerate(words)}
    ends = {word.end: i for i, word in enumerate(words)}
    out = []
    for start, end in spans:
        first, last = starts.get(start), ends.get(end)
        if first is not None and last is not None and last >= first:
            out.append((first, last))
    return out


def decode_spans(
    scores: torch.Tensor,
    num_words: int,
    threshold: float,
    flat_ner: bool = True,
    multi_label: bool = False,
    allowed: np.ndarray | None = None,
    max_candidates: int | None = None,
) -> KeptSpans:
    """Kept spans of one text from its ``[num_words, max_width, num_labels]`` scores;
    ``allowed`` (:func:`span_filter`) zeroes every other span's scores first, as gliner's
    ``input_spans`` do. ``TooManyCandidates`` when more than ``max_candidates`` cells are
    above the threshold (checked before they are ranked and made into Python objects)."""
    cells = scores.numpy()
    if allowed is not None:
        cells = cells * allowed[: cells.shape[0], :, None]
    above = cells > threshold
    if max_candidates is not None:  # counted before any index array is made
        count = int(np.count_nonzero(above))
        if count > max_candidates:
            raise TooManyCandidates(count)
    # row-major, like torch.where; flatnonzero + unravel_index is ~5x faster than a 3-D nonzero
    hits = np.flatnonzero(above)
    starts, widths, labels = np.unravel_index(hits, cells.shape)
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
    kept = greedy_spans(ranked, num_words, flat_ner, multi_label)
    kept.candidates = len(values)
    return kept


def greedy_spans(
    ranked: Iterable[tuple[int, int, int, float]], num_words: int, flat_ner: bool, multi_label: bool
) -> KeptSpans:
    """gliner's greedy selection over candidates best first, sorted by first word: a candidate
    is kept unless it clashes with a kept span (flat: any shared word; nested: a partial
    overlap; the very same span: a clash unless ``multi_label``). Any span width."""
    kept = KeptSpans()
    kept_spans: set[tuple[int, int]] = set()  # consulted only where the same span may recur
    taken = bytearray(num_words)  # flat NER: words covered by a kept span
    ones = b"\x01" * num_words  # occupancy marks, sliced to a span's width
    # Nested NER: per word, the farthest end of the kept spans starting there and the nearest
    # start of those ending there (-1 / num_words: none).
    farthest_end = [-1] * num_words
    nearest_start = [num_words] * num_words
    for start, end, label, score in ranked:
        if flat_ner:
            # Kept spans are disjoint, so a clash is a taken word; the one allowed clash is the
            # very same span again under multi-label (its words are taken by itself).
            if taken.find(1, start, end + 1) >= 0:
                if not (multi_label and (start, end) in kept_spans):
                    continue
            else:
                taken[start : end + 1] = ones[: end + 1 - start]
        elif (start, end) in kept_spans:
            # The same span again: a clash unless multi-label. Every other kept span is
            # nested with it already.
            if not multi_label:
                continue
        elif end > start and (
            # A partial overlap is a kept span starting inside this one (after its first word)
            # and ending past it, or ending inside it (before its last word) and starting
            # before it; containment either way and disjoint spans are no clash.
            max(farthest_end[start + 1 : end + 1]) > end or min(nearest_start[start:end]) < start
        ):
            continue
        kept.append(Candidate(start, end, label, score))
        if multi_label or not flat_ner:
            kept_spans.add((start, end))
        if not flat_ner:
            farthest_end[start] = max(farthest_end[start], end)
            nearest_start[end] = min(nearest_start[end], start)
    kept.sort(key=lambda cand: cand.start)
    return kept


# gliner's ``class_probs``: this many most probable labels of an entity's span.
CLASS_PROBS_TOP_K = 5


def class_probs(cell: np.ndarray, labels: Sequence[str]) -> dict[str, float]:
    """The ``CLASS_PROBS_TOP_K`` most probable labels of one span cell, best first."""
    order = np.argsort(-cell, kind="stable")[:CLASS_PROBS_TOP_K]
    return {labels[i]: float(cell[i]) for i in order}


def to_entities(
    spans: Sequence[Candidate],
    words: TextWords,
    labels: Sequence[str],
    text: str,
    scores: torch.Tensor | None = None,
) -> list[dict]:
    """Entity dicts in gliner's form; with ``scores`` (the text's score tensor) each gets
    ``class_probs`` as well."""
    cells = None if scores is None else scores.numpy()
    entities = []
    for span in spans:
        start, end = words.bounds(span.start, span.end)
        entity = {
            "start": start,
            "end": end,
            "text": text[start:end],
            "label": labels[span.label],
            "score": span.score,
        }
        if cells is not None:
            entity["class_probs"] = class_probs(cells[span.start, span.end - span.start], labels)
        entities.append(entity)
    return entities
