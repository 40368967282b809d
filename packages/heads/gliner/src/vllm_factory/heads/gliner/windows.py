"""Texts longer than a GLiNER model reads (``max_len`` words): read in windows and merged, cut,
or refused (``long_text``: ``"window"``, ``"truncate"``, ``"error"``); no vLLM import.

Windows: a text of more than ``max_len`` words (gliner's splitter) is read as windows of
``max_len`` words; window ``k`` starts at word ``k * (max_len - overlap)`` and the last one
ends at the text's last word, so consecutive windows share ``overlap`` words. Each window is a
model input of its own (per label chunk), scored as a text of its own.

Merging: a window's span x label cell counts only for spans that end inside the window. The
text's score tensor holds, per cell, the highest score of the windows that hold that span whole
(0 where none does: spans wider than the overlap across a window border, and spans past the
text's end). Selecting the cells above the threshold of that tensor is the candidate list of
every window (all spans above the threshold, every label, word indices moved by the window's
start) with duplicates from overlaps (same span and label) keeping the higher score; gliner's
greedy selection (``flat_ner`` / ``multi_label``) then runs once over it, in
:func:`~vllm_factory.heads.gliner.decoding.decode_spans`. ``input_spans``, ``class_probs``
and linking read the same whole-text tensor, so they work across windows.

A text that fits in one window gets the same prompt and decoding as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from vllm_factory.heads.gliner.prompts import TextWords, split_words

LONG_TEXT_MODES = ("window", "truncate", "error")


def default_overlap(max_len: int) -> int:
    """Words consecutive windows share when a request does not say: a quarter of ``max_len``
    (rounded down), which a span of up to ``max_width`` words straddling a border fits into
    for gliner's usual sizes (``max_len`` 384, ``max_width`` 12)."""
    return max_len // 4


def max_overlap(max_len: int) -> int:
    """The most words consecutive windows may share: half a window."""
    return max_len // 2


def window_bounds(num_words: int, max_len: int, overlap: int) -> list[tuple[int, int]]:
    """``(first word, end word exclusive)`` of each window of a text of ``num_words`` words."""
    if num_words <= max_len:
        return [(0, num_words)]
    stride = max_len - overlap
    bounds = []
    start = 0
    while True:
        end = min(start + max_len, num_words)
        bounds.append((start, end))
        if end == num_words:
            return bounds
        start += stride


def words_within(windows: int, max_len: int, overlap: int) -> int:
    """The most words ``windows`` windows cover (``windows >= 1``)."""
    return max_len + (windows - 1) * (max_len - overlap)


def sub_words(words: TextWords, first: int, end: int) -> TextWords:
    """Words ``first`` to ``end`` (exclusive) of ``words``, character offsets still into the
    whole text."""
    if first == 0 and end == len(words):
        return words
    return TextWords(words.texts[first:end], words._offsets[2 * first : 2 * end + 1])


@dataclass(frozen=True)
class TextWindows:
    """One text's words as the response maps entities to (all of them when read in windows,
    the first ``max_len`` when cut), its windows, and whether it was cut."""

    words: TextWords
    bounds: list[tuple[int, int]]
    truncated: bool = False

    def window_words(self) -> list[TextWords]:
        """Each window's words (a text that fits is its own single window)."""
        return [sub_words(self.words, first, end) for first, end in self.bounds]


def split_text(text: str, max_len: int, mode: str, overlap: int, max_words: int) -> TextWindows:
    """``text``'s words and windows. ``"window"`` splits at most ``max_words`` + 1 words (the
    caller's bound: more means too many windows, see :func:`words_within`); ``"truncate"``
    keeps the first ``max_len``; ``"error"`` keeps them too (the caller refuses a text whose
    ``truncated`` is set)."""
    if mode != "window":
        words = split_words(text, max_len + 1)
        if len(words) <= max_len:
            return TextWindows(words, [(0, len(words))])
        cut = TextWords(words.texts[:max_len], words._offsets)
        return TextWindows(cut, [(0, max_len)], truncated=True)
    words = split_words(text, max_words + 1)
    return TextWindows(words, window_bounds(len(words), max_len, overlap))


def merge_scores(
    parts: list[torch.Tensor], bounds: list[tuple[int, int]], num_words: int
) -> torch.Tensor:
    """The text's ``[num_words, max_width, labels]`` scores from its windows' (see the module
    docstring); one window's scores are returned as they are."""
    if len(parts) == 1:
        return parts[0]
    width, labels = parts[0].shape[1], parts[0].shape[2]
    merged = torch.zeros(num_words, width, labels, dtype=parts[0].dtype)
    offsets = torch.arange(width)
    for (first, end), scores in zip(bounds, parts):
        size = end - first
        inside = (torch.arange(size)[:, None] + offsets[None, :] < size).to(scores.dtype)
        rows = merged[first:end]
        torch.maximum(rows, scores * inside[:, :, None], out=rows)
    return merged
