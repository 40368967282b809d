"""Token-level GLiNER (``span_mode: token_level``): scores per word and label, decoded into
spans; no vLLM import.

The model (gliner's token model, uni-encoder): the same word vectors and ``<<ENT>>`` label
vectors as a span model (no ``prompt_rep_layer`` on the labels), then a scorer over every
(word, label) pair. Each side is projected to two halves, ``t = [t1; t2]`` and ``l = [l1; l2]``,
and an MLP reads ``[t1; l1; t2 * l2]`` into three logits: the word starts, ends, or lies inside
an entity of that label. :class:`TokenScorer` computes the MLP's first layer as the sum of a
per-word term, a per-label term and the pair term (the only part that needs both), a chunk of
words at a time; the head sends the sigmoid of the three logits, ``[words, labels, 3]``.

Decoding (:func:`decode_tokens`), what gliner's token decoder keeps: for each label, every
(first word, last word) pair whose start score at the first word and end score at the last
word are above the threshold and whose inside scores are at least the threshold on every word
from the first to the last; its score is the least of those scores. There is no span width
limit. Candidates are listed by first word, label, then last word, ranked by score (stable)
and kept greedily as span models keep theirs (flat / nested, multi-label).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from vllm_factory.heads.gliner.decoding import KeptSpans, TooManyCandidates, greedy_spans

# The three scores of a (word, label) pair, in gliner's order.
START, END, INSIDE = 0, 1, 2
# Pair activations (``words x labels x 4 * width`` of the MLP's hidden layer) made at a time.
PAIR_CHUNK = {"cpu": 1 << 22, "other": 1 << 26}


class TokenScorer(nn.Module):
    """gliner's token scorer: ``proj_token``, ``proj_label`` (width -> 2 * width) and
    ``out_mlp`` (Linear(3 * width, 4 * width), Dropout, ReLU, Linear(4 * width, 3)); dropout is
    inert here. Parameter names follow gliner's state dict (``scorer.*``)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width
        self.proj_token = nn.Linear(width, width * 2)
        self.proj_label = nn.Linear(width, width * 2)
        self.out_mlp = nn.Sequential(
            nn.Linear(width * 3, width * 4), nn.Dropout(0.0), nn.ReLU(), nn.Linear(width * 4, 3)
        )

    def logits(self, words: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """``[words, labels, 3]`` start / end / inside logits of one text's ``[words, width]``
        word vectors against its ``[labels, width]`` label vectors."""
        width = self.width
        first, last = self.out_mlp[0], self.out_mlp[3]
        token = self.proj_token(words)
        label = self.proj_label(labels)
        # first layer on [t1; l1; t2 * l2] == W_t t1 + (W_l l1 + b) + W_p (t2 * l2)
        per_word = F.linear(token[:, :width], first.weight[:, :width])
        per_label = F.linear(label[:, :width], first.weight[:, width : 2 * width], first.bias)
        pair_weight = first.weight[:, 2 * width :]
        count, num_labels = words.shape[0], labels.shape[0]
        budget = PAIR_CHUNK["cpu" if words.device.type == "cpu" else "other"]
        step = max(1, budget // max(1, num_labels * first.out_features))
        parts = []
        for start in range(0, count, step):
            rows = slice(start, min(start + step, count))
            pairs = token[rows, None, width:] * label[None, :, width:]  # [n, labels, width]
            hidden = F.linear(pairs, pair_weight)
            hidden += per_word[rows, None, :]
            hidden += per_label[None, :, :]
            parts.append(last(hidden.relu_()))
        if not parts:
            return words.new_zeros((0, num_labels, 3))
        return parts[0] if len(parts) == 1 else torch.cat(parts)


class TokenSpans(NamedTuple):
    """Candidate spans of one text, in gliner's listing order (first word, label, last word)."""

    start: np.ndarray
    end: np.ndarray  # inclusive
    label: np.ndarray
    score: np.ndarray


def token_candidates(
    scores: np.ndarray,
    threshold: float,
    allowed: set[tuple[int, int]] | None = None,
    max_candidates: int | None = None,
) -> TokenSpans:
    """Every span gliner's token decoder lists for ``scores`` ``[words, labels, 3]``
    (sigmoid), in its order. ``allowed``: only these (first word, last word) spans (gliner's
    ``input_spans``). ``TooManyCandidates`` when more than ``max_candidates`` are listed
    (counted before any span is made)."""
    num_words, num_labels = scores.shape[0], scores.shape[1]
    # gliner compares start and end scores with the threshold in float32 (torch.where on the
    # tensor) and inside scores in Python floats: ``inside < threshold`` drops a span.
    starts = scores[:, :, START] > threshold
    ends = scores[:, :, END] > threshold
    inside_ok = scores[:, :, INSIDE].astype(np.float64) >= threshold
    # Per (word, label): the first word at or after it whose inside score is too low.
    # A span (s, e) of label c is whole when e < breaks[s, c].
    breaks = np.full((num_words + 1, num_labels), num_words, dtype=np.int64)
    positions = np.arange(num_words)[:, None]
    low = np.where(~inside_ok, positions, num_words)
    breaks[:num_words] = np.minimum.accumulate(low[::-1], axis=0)[::-1]
    if allowed is not None:
        span_start, span_end, span_label = _allowed_candidates(starts, ends, breaks, allowed)
    else:
        span_start, span_end, span_label = _all_candidates(starts, ends, breaks, max_candidates)
    if max_candidates is not None and len(span_start) > max_candidates:
        raise TooManyCandidates(len(span_start))
    score = np.minimum(scores[span_start, span_label, START], scores[span_end, span_label, END])
    if len(span_start):  # and the least inside score over each span's words
        inside = scores[:, :, INSIDE]
        score = np.minimum(score, _range_minimum(inside, span_start, span_end, span_label))
    return TokenSpans(span_start, span_end, span_label, score)


def _all_candidates(
    starts: np.ndarray, ends: np.ndarray, breaks: np.ndarray, max_candidates: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first word, last word, label) of every candidate, by first word, label, last word;
    ``TooManyCandidates`` from their count, before they are made."""
    num_labels = starts.shape[1]
    first_word, label = np.nonzero(starts)  # row-major: by first word, then label
    # Per label: the words whose end score is above the threshold, ascending.
    end_words = [np.flatnonzero(ends[:, c]) for c in range(num_labels)]
    lo = np.zeros(len(first_word), dtype=np.int64)
    hi = np.zeros(len(first_word), dtype=np.int64)
    for c in range(num_labels):
        mine = label == c
        lo[mine] = np.searchsorted(end_words[c], first_word[mine], side="left")
        hi[mine] = np.searchsorted(end_words[c], breaks[first_word[mine], c], side="left")
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    if max_candidates is not None and total > max_candidates:
        raise TooManyCandidates(total)
    owner = np.repeat(np.arange(len(first_word)), counts)
    rank = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    span_start, span_label = first_word[owner], label[owner]
    span_end = np.empty(total, dtype=np.int64)
    for c in range(num_labels):
        mine = span_label == c
        span_end[mine] = end_words[c][lo[owner[mine]] + rank[mine]]
    return span_start, span_end, span_label


def _allowed_candidates(
    starts: np.ndarray, ends: np.ndarray, breaks: np.ndarray, allowed: set[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As :func:`_all_candidates`, among the ``allowed`` (first word, last word) spans only."""
    num_words, num_labels = starts.shape
    pairs = np.array(
        sorted((s, e) for s, e in allowed if 0 <= s <= e < num_words), dtype=np.int64
    ).reshape(-1, 2)
    first = np.repeat(pairs[:, 0], num_labels)
    last = np.repeat(pairs[:, 1], num_labels)
    label = np.tile(np.arange(num_labels), len(pairs))
    order = np.lexsort((last, label, first))  # by first word, label, last word
    first, last, label = first[order], last[order], label[order]
    whole = starts[first, label] & ends[last, label] & (last < breaks[first, label])
    return first[whole], last[whole], label[whole]


def _range_minimum(
    values: np.ndarray, first: np.ndarray, last: np.ndarray, column: np.ndarray
) -> np.ndarray:
    """``min(values[first[i] : last[i] + 1, column[i]])`` for every i (a sparse table: log2 of
    the words tables of running minima, two lookups per span)."""
    table = [values]
    span = 1
    while 2 * span <= values.shape[0]:
        prev = table[-1]
        table.append(np.minimum(prev[:-span], prev[span:]))
        span *= 2
    length = last - first + 1
    level = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(len(first), dtype=values.dtype)
    for k in np.unique(level).tolist():
        mine = level == k
        size = 1 << k
        out[mine] = np.minimum(
            table[k][first[mine], column[mine]], table[k][last[mine] - size + 1, column[mine]]
        )
    return out


def decode_tokens(
    scores: torch.Tensor,
    threshold: float,
    flat_ner: bool = True,
    multi_label: bool = False,
    allowed: set[tuple[int, int]] | None = None,
    max_candidates: int | None = None,
) -> KeptSpans:
    """Kept spans of one text from its ``[words, labels, 3]`` token scores (see the module
    docstring), sorted by first word; ``candidates`` counts the spans ranked."""
    spans = token_candidates(scores.numpy(), threshold, allowed, max_candidates)
    order = np.argsort(-spans.score, kind="stable")
    ranked = zip(
        spans.start[order].tolist(),
        spans.end[order].tolist(),
        spans.label[order].tolist(),
        spans.score[order].tolist(),
    )
    kept = greedy_spans(ranked, scores.shape[0], flat_ner, multi_label)
    kept.candidates = len(order)
    return kept


def merge_word_scores(
    parts: list[torch.Tensor], bounds: list[tuple[int, int]], num_words: int
) -> torch.Tensor:
    """A long text's ``[num_words, labels, 3]`` token scores from its windows' (``bounds``:
    each window's first word and end word): per word, label and score kind, the highest of the
    windows that hold the word. One window's scores are returned as they are."""
    if len(parts) == 1:
        return parts[0]
    merged = torch.zeros(num_words, *parts[0].shape[1:], dtype=parts[0].dtype)
    for (first, end), scores in zip(bounds, parts):
        rows = merged[first:end]
        torch.maximum(rows, scores, out=rows)
    return merged
