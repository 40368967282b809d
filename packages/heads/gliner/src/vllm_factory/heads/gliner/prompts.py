"""gliner-exact prompt construction and the compact word layout sent to the engine.

No vLLM import. gliner splits a text into words with one regex, truncates to ``max_len``
words, prefixes the label prompt ``<<ENT>> label <<ENT>> label ... <<SEP>>`` (each item one
"word"), and tokenizes the word list with ``is_split_into_words=True`` and the tokenizer's own
truncation. The head then needs, per prompt, which tokens belong to which text word; that is
what :class:`WordLayout` carries (see :func:`prompt_key` for how it reaches the engine).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, overload

import numpy as np
import torch

# gliner's "whitespace" splitter: runs of word characters joined by - or _, else any single
# non-space character.
WORD_PATTERN = re.compile(r"\w+(?:[-_]\w+)*|\S")
# The same pattern as one capturing group: ``split`` yields [gap, word, gap, word, ..., gap].
_WORD_SPLIT = re.compile(f"({WORD_PATTERN.pattern})")
# Key of the per-prompt word layouts inside ``PoolingParams.extra_kwargs``.
LAYOUT_KEY = "gliner_words"
# A word layout on the wire: [first_token, *counts] as little-endian uint32.
WIRE_DTYPE = np.dtype("<u4")


class Word(NamedTuple):  # a tuple: made per word of every text, 1.6x cheaper than a dataclass
    text: str
    start: int  # character offsets into the original text
    end: int


_make_word = functools.partial(tuple.__new__, Word)  # a Word without its Python __new__


class TextWords(Sequence[Word]):
    """The words of one text, as :func:`split_words` found them: a sequence of :class:`Word`.

    Held as the words' strings (``texts``, what the tokenizer reads) and the character offsets
    of the splitter's pieces, not as one object per word: a ``Word`` is made only when one is
    looked up (an entity's character offsets need none, :meth:`bounds`). 488 -> 296 us to
    split a 417-word text on a 2-core CI machine, most of what is left being the regex."""

    __slots__ = ("_offsets", "texts")

    def __init__(self, texts: list[str], offsets: list[int]) -> None:
        self.texts = texts
        # offsets[2 * i + 1] / offsets[2 * i + 2]: start / end of word i
        self._offsets = offsets

    def __len__(self) -> int:
        return len(self.texts)

    @overload
    def __getitem__(self, index: int) -> Word: ...

    @overload
    def __getitem__(self, index: slice) -> list[Word]: ...

    def __getitem__(self, index: int | slice) -> Word | list[Word]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.texts)))]
        if index < 0:
            index += len(self.texts)
        if not 0 <= index < len(self.texts):
            raise IndexError("word index out of range")
        at = 2 * index + 1
        return _make_word((self.texts[index], self._offsets[at], self._offsets[at + 1]))

    def bounds(self, first: int, last: int) -> tuple[int, int]:
        """Character offsets from word ``first``'s start to word ``last``'s end (an entity's
        span; both indexes ``>= 0``), without making their ``Word``s."""
        return self._offsets[2 * first + 1], self._offsets[2 * last + 2]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TextWords({list(self)!r})"


def split_words(text: str, max_len: int | None = None) -> TextWords:
    """Words of ``text`` as gliner's whitespace splitter yields them (``WORD_PATTERN``'s
    matches, in order), at most ``max_len``.

    The matches and the gaps between them come from one ``split`` call and their offsets from
    the running sum of the pieces' lengths, with no Python call per word (see
    :class:`TextWords`); the API process splits every text of every request."""
    # With max_len, the split stops after that many words: the rest of a long text (up to the
    # request's character limit) is one piece, never scanned.
    pieces = _WORD_SPLIT.split(text, maxsplit=max_len) if max_len else _WORD_SPLIT.split(text)
    offsets = list(itertools.accumulate(map(len, pieces), initial=0))
    words = pieces[1::2] if max_len is None else pieces[1 : 2 * max_len : 2]
    return TextWords(words, offsets)


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Labels in first-occurrence order without duplicates (gliner's class mapping)."""
    return list(dict.fromkeys(labels))


def prompt_words(labels: Sequence[str], ent_token: str, sep_token: str) -> list[str]:
    words: list[str] = []
    for label in labels:
        words += [ent_token, label]
    return [*words, sep_token]


@dataclass(frozen=True)
class WordLayout:
    """Where each text word's sub-tokens sit in the prompt.

    ``counts[j]`` tokens starting at ``first_token + sum(counts[:j])`` belong to word ``j``;
    a word with count 0 has no token (cut by truncation) and gets a zero vector, as in gliner.
    ``len(counts)`` is the number of words gliner scores.
    """

    first_token: int
    counts: tuple[int, ...]

    def fits(self, num_tokens: int) -> bool:
        """True when every word's sub-tokens lie inside a prompt of ``num_tokens`` tokens."""
        return self.first_token + sum(self.counts) <= num_tokens

    def to_wire(self) -> bytes:
        return ints_to_wire([self.first_token, *self.counts])

    @classmethod
    def from_wire(cls, values: bytes | Sequence[int]) -> WordLayout:
        """The layout :meth:`to_wire` sent (:func:`ints_from_wire`: bytes, or the older flat
        list); anything else, or an empty layout, raises ``ValueError``. No Python loop over
        the words: the engine decodes every prompt's layout on its only thread."""
        array = ints_from_wire(values)
        if array.size < 1:
            raise ValueError("empty GLiNER word layout")
        return cls(int(array[0]), tuple(array[1:].tolist()))


def ints_to_wire(values: Sequence[int]) -> bytes:
    """Integers >= 0 as little-endian uint32 bytes: how a prompt's layout rides in
    ``PoolingParams.extra_kwargs``. Bytes, not a list: vLLM deep-copies ``PoolingParams`` per
    request in the API process, ~150 us for a list of 380 ints and nothing for bytes
    (immutable), and the engine reads them back in one NumPy call."""
    return np.asarray(values, dtype=WIRE_DTYPE).tobytes()


def ints_from_wire(values: bytes | Sequence[int]) -> np.ndarray:
    """What :func:`ints_to_wire` made, or the same numbers as a flat list (the older wire
    form), as a 1-D int64 array; anything else (a ragged, nested, non-integer or negative list,
    bytes of a partial number) raises ``ValueError``."""
    if isinstance(values, (bytes, bytearray, memoryview)):
        if len(values) % WIRE_DTYPE.itemsize:
            raise ValueError(f"malformed layout: {len(values)} bytes")
        return np.frombuffer(values, dtype=WIRE_DTYPE).astype(np.int64)
    try:
        array = np.asarray(values)
    except (TypeError, ValueError) as exc:  # ragged or not numeric at all
        raise ValueError(f"malformed layout: {exc}") from None
    if array.ndim != 1 or (array.size and (array.dtype.kind not in "iu" or array.min() < 0)):
        raise ValueError(f"malformed layout {array.ravel()[:8].tolist()}...")
    return array.astype(np.int64)


def layout_from_word_ids(
    word_ids: Sequence[int | None], num_prompt_words: int, num_words: int
) -> WordLayout:
    """Word layout from the tokenizer's ``word_ids()``, numbered as gliner's word mask does.

    gliner numbers words by counting the distinct word ids it meets, minus the prompt words,
    so a word that produced no token at all shifts the words after it; we number the same way.
    """
    counts = [0] * num_words
    first_token: int | None = None
    seen = 0
    previous: int | None = None
    for position, word_id in enumerate(word_ids):
        if word_id is None:
            previous = None
            continue
        if word_id != previous:
            seen += 1
        previous = word_id
        index = seen - num_prompt_words
        if index >= 1 and index <= num_words:
            if first_token is None:
                first_token = position
            counts[index - 1] += 1
    if first_token is None:
        first_token = len(word_ids)
    return WordLayout(first_token, tuple(counts))


def layout_from_counts(
    counts: Sequence[int], start: int, num_prompt_words: int, num_words: int, total: int
) -> WordLayout:
    """The layout :func:`layout_from_word_ids` gives for a single sequence whose words' tokens
    lie back to back from position ``start``, word ``i`` holding ``counts[i]`` of them (prompt
    words first), ``total`` tokens in all: gliner numbers only the words that kept a token, so
    the text's words are the kept words after the first ``num_prompt_words`` kept ones."""
    kept = [count for count in counts if count]
    text = kept[num_prompt_words : num_prompt_words + num_words]
    if not text:
        return WordLayout(total, (0,) * num_words)
    first = start + sum(kept[:num_prompt_words])
    return WordLayout(first, (*text, *(0,) * (num_words - len(text))))


def prompt_key(token_ids: Sequence[int] | torch.Tensor) -> str:
    """Stable key of a prompt's token ids (same value in the API and engine processes).

    Online, vLLM sends one ``PoolingParams`` for all prompts of a request, so each prompt's
    word layout travels in a map keyed by this digest of its own tokens.
    """
    if isinstance(token_ids, torch.Tensor):
        data = token_ids.to(torch.int64).cpu().numpy().tobytes()
    else:
        data = np.asarray(token_ids, dtype=np.int64).tobytes()  # the same bytes, 3x faster
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def layout_for(extra: Any, token_ids: torch.Tensor) -> WordLayout | None:
    """The word layout the IOProcessor attached to this prompt, or None when there is none.

    None is what vLLM's start-up dummy runs (memory profiling, warm-up) produce, and what a
    request that bypassed the GLiNER IOProcessor produces; the head scores neither and must
    not raise inside the engine, so this never raises either.
    """
    layouts = extra.get(LAYOUT_KEY) if extra else None
    if not layouts or token_ids is None:
        return None
    values = layouts.get(prompt_key(token_ids))
    if values is None:
        return None
    try:
        return WordLayout.from_wire(values)
    except (TypeError, ValueError):
        return None
