"""Span scores -> entities, as gliner's span decoder does it; no vLLM import.

Candidates are the (start, width, label) cells above the threshold whose span ends inside the
text, in row-major order; they are ranked by score (stable, so ties keep that order) and kept
greedily unless they clash with a kept span: flat NER forbids any overlap, nested NER only
partial overlap; the same span twice is a clash unless ``multi_label``. Kept spans are sorted
by start (stable) and mapped to character offsets of the original text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

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


def _clash(a: Candidate, b: Candidate, flat_ner: bool, multi_label: bool) -> bool:
    if (a.start, a.end) == (b.start, b.end):
        return not multi_label
    disjoint = a.start > b.end or b.start > a.end
    if flat_ner:
        return not disjoint
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
    above = scores > threshold
    hits = above.nonzero().tolist()  # row-major, like torch.where
    values = scores[above].tolist()  # same order
    candidates = [
        Candidate(s, s + k, c, score) for (s, k, c), score in zip(hits, values) if s + k < num_words
    ]
    candidates.sort(key=lambda cand: -cand.score)
    kept: list[Candidate] = []
    for cand in candidates:
        if not any(_clash(cand, other, flat_ner, multi_label) for other in kept):
            kept.append(cand)
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
