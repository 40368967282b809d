"""Texts longer than a GLiNER model reads: read in windows and merged, cut, or refused
(``long_text``: ``"window"``, ``"truncate"``, ``"error"``); no vLLM import.

What a model reads of one prompt: at most ``max_len`` words (gliner's splitter), and only the
words whose tokens fit the tokenizer's limit (``token_room``: the limit less the special tokens
and, for a uni-encoder, the longest label-chunk prompt of the request); gliner gives a word past
that limit a zero vector. A text *fits* when it holds at most ``max_len`` words and its words'
tokens fit ``token_room``.

Windows: a text that fits is one window, with the same prompt and decoding as before. Else each
window starts at a word and ends at the last word such that the window holds at most ``max_len``
words and its words' tokens fit ``token_room`` (a single word wider than the room is a window of
its own, its tokens cut as gliner cuts them); the next window starts ``overlap`` words before
that end, or one word after the window's start when the window holds ``overlap`` words or fewer
(a room smaller than the overlap). Every word is read by some window. Each window is a model
input of its own (per label chunk), scored as a text of its own. With a token room of at least
``max_len`` tokens' worth of words, window ``k`` starts at word ``k * (max_len - overlap)``.

Merging: a window's span x label cell counts only for spans that end inside the window. The
text's score tensor holds, per cell, the highest score of the windows that hold that span whole
(0 where none does: spans wider than the overlap across a window border, and spans past the
text's end). Selecting the cells above the threshold of that tensor is the candidate list of
every window (all spans above the threshold, every label, word indices moved by the window's
start) with duplicates from overlaps (same span and label) keeping the higher score; gliner's
greedy selection (``flat_ner`` / ``multi_label``) then runs once over it, in
:func:`~vllm_factory.heads.gliner.decoding.decode_spans`. ``input_spans``, ``class_probs``
and linking read the same whole-text tensor, so they work across windows.

``"truncate"`` reads what gliner reads of the text (its first ``max_len`` words, those past the
token room as zero vectors) and says ``truncated`` when a word was not read whole;
``"error"`` refuses a text that does not fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


def window_bounds(
    num_words: int,
    max_len: int,
    overlap: int,
    counts: Sequence[int] | None = None,
    room: int | None = None,
    max_windows: int | None = None,
) -> list[tuple[int, int]]:
    """``(first word, end word exclusive)`` of each window of a text of ``num_words`` words
    (the module docstring's rule); ``counts``: each word's token count, ``room``: the tokens a
    window's words may hold (no token bound without them). Stops after ``max_windows``
    windows (the caller's bound: more are refused), the last then short of the text's end."""
    if counts is None or room is None:
        counts, room = None, None
    if num_words <= max_len and (counts is None or sum(counts[:num_words]) <= room):
        return [(0, num_words)]
    bounds: list[tuple[int, int]] = []
    start = 0
    while max_windows is None or len(bounds) < max_windows:
        end = min(start + max_len, num_words)
        if counts is not None:
            end, used = start, 0
            while end < num_words and end - start < max_len and used + counts[end] <= room:
                used += counts[end]
                end += 1
            end = max(end, start + 1)  # a word wider than the room: alone, cut by tokens
        bounds.append((start, end))
        if end == num_words:
            break
        start = max(start + 1, end - overlap)
    return bounds


def words_within(windows: int, max_len: int, overlap: int) -> int:
    """The most words ``windows`` windows cover (``windows >= 1``; fewer when the token room
    ends windows early)."""
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


def split_text(
    text: str,
    max_len: int,
    mode: str,
    overlap: int,
    max_words: int,
    count_tokens: Callable[[Sequence[str]], list[int]] | None = None,
    room: int | None = None,
    max_windows: int | None = None,
) -> TextWindows:
    """``text``'s words and windows. ``count_tokens``: each word's token count (given the
    words), ``room``: a prompt's tokens for the text (no token bound without them).
    ``"window"`` splits at most ``max_words`` + 1 words into at most ``max_windows`` windows
    (the caller's bounds: more words or windows mean too many windows, see
    :func:`words_within`); ``"truncate"`` keeps the first ``max_len`` words, and says
    ``truncated`` when there were more or their tokens do not fit ``room``; ``"error"`` does
    the same (the caller refuses a text whose ``truncated`` is set)."""
    bounded = count_tokens is not None and room is not None
    if mode != "window":
        words = split_words(text, max_len + 1)
        if len(words) > max_len:
            words = TextWords(words.texts[:max_len], words._offsets)
            return TextWindows(words, [(0, max_len)], truncated=True)
        over = bounded and sum(count_tokens(words.texts)) > room
        return TextWindows(words, [(0, len(words))], truncated=over)
    words = split_words(text, max_words + 1)
    counts = count_tokens(words.texts) if bounded else None
    bounds = window_bounds(len(words), max_len, overlap, counts, room, max_windows)
    return TextWindows(words, bounds)


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
