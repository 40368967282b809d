"""Token ids of a pre-split word list, as ``tokenizer(words, is_split_into_words=True,
truncation=True, max_length=L)`` makes them, from a per-word cache.

A fast (Rust) tokenizer given pre-split words normalizes, pre-tokenizes and tokenizes each word
on its own and only then joins them, truncates the joined ids from the right and adds the
special tokens. A word's ids therefore depend on the word alone, and a text's ids are its
words' cached ids joined, cut to ``L`` less the special tokens, framed by them. Tokenizing a
512-token GLiNER prompt word by word costs the API process about 1.2 ms on a 2-core CPU; most
words of a text were seen before, and a dictionary look-up per word costs microseconds.

:class:`WordTokenizer` checks itself against the tokenizer's own call when it is made (probe
words with accents, digits, punctuation, the tokenizer's added tokens and a list long enough to
truncate) and falls back to that call for a tokenizer where they differ, or which is not a fast
tokenizer truncating from the right.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from vllm_factory.heads.gliner.prompts import WordLayout, layout_from_counts, layout_from_word_ids

logger = logging.getLogger(__name__)

# Words the cache is checked on when it is made: accents, scripts, digits, punctuation, emoji.
PROBE_TEXT = (
    "The Ada Lovelace Institute opened in London on 3 March 2024 , costing $4.5m "
    "( about €5,2 Mio . ) ; naïve café São Paulo Zürich 東京 Москва 12:30pm e-mail "
    "don't U.S.A. ___ 🙂 x"
)
CACHE_WORDS = 1 << 16  # distinct words kept (up to ~30 MB); emptied when it grows past this


def _probe_words(tokenizer: Any) -> list[str]:
    added = [t for t in getattr(tokenizer, "all_special_tokens", []) if t]
    added += list(getattr(tokenizer, "get_added_vocab", dict)().keys())[:8]
    return added + PROBE_TEXT.split(" ")


class WordTokenizer:
    """``tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)``'s
    ids and word ids, from a per-word cache where that is exact (see the module docstring)."""

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self._cache: dict[str, tuple[int, ...]] = {}
        self._backend = self._own_backend(tokenizer)
        self.cached = False
        if self._backend is not None:
            self._prefix, self._suffix = self._special_tokens()
            self.cached = self._agrees()
            if not self.cached:
                logger.info("word-token cache off: it differs from the tokenizer's own call")
                self._cache.clear()

    @staticmethod
    def _own_backend(tokenizer: Any) -> Any | None:
        """A copy of the fast tokenizer's Rust tokenizer with no truncation or padding (the
        tokenizer's own is reconfigured by every ``__call__``), or None."""
        backend = getattr(tokenizer, "_tokenizer", None)
        if backend is None or getattr(tokenizer, "truncation_side", "right") != "right":
            return None
        try:
            own = type(backend).from_str(backend.to_str())
        except Exception:  # noqa: BLE001 - any failure means: use the tokenizer's own call
            return None
        own.no_truncation()
        own.no_padding()
        return own

    def _special_tokens(self) -> tuple[list[int], list[int]]:
        """The ids the post-processor puts before and after one sequence."""
        framed = self._backend.encode(["a"], is_pretokenized=True, add_special_tokens=True)
        inner = [i for i, w in enumerate(framed.word_ids) if w is not None]
        if not inner:
            return [], []
        ids = framed.ids
        return list(ids[: inner[0]]), list(ids[inner[-1] + 1 :])

    def _agrees(self) -> bool:
        words = _probe_words(self.tokenizer)
        long = words * (self.max_length // max(1, len(words)) + 2)
        for sample in (words, words[:1], long):
            if self._cached_call(sample) != self._own_call(sample):
                return False
        return True

    def _word(self, word: str) -> tuple[int, ...]:
        ids = self._cache.get(word)
        if ids is None:
            ids = tuple(
                self._backend.encode([word], is_pretokenized=True, add_special_tokens=False).ids
            )
            if len(self._cache) >= CACHE_WORDS:
                self._cache.clear()
            self._cache[word] = ids
        return ids

    def _cached_counts(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """Token ids, and per word how many of them it holds (0: none, or cut by truncation)."""
        ids: list[int] = []
        counts: list[int] = []
        room = self.max_length - len(self._prefix) - len(self._suffix)
        for word in words:
            if len(ids) >= room:
                break
            pieces = self._word(word)
            ids.extend(pieces)
            counts.append(len(pieces))
        if len(ids) > room:  # the last word is cut (it keeps at least one token)
            counts[-1] -= len(ids) - room
            del ids[room:]
        counts.extend([0] * (len(words) - len(counts)))
        return self._prefix + ids + self._suffix, counts

    def _cached_call(self, words: Sequence[str]) -> tuple[list[int], list[int | None]]:
        ids, counts = self._cached_counts(words)
        word_ids: list[int | None] = [None] * len(self._prefix)
        for index, count in enumerate(counts):
            word_ids.extend([index] * count)
        return ids, word_ids + [None] * len(self._suffix)

    def _own_call(self, words: Sequence[str]) -> tuple[list[int], list[int | None]]:
        encoding = self.tokenizer(
            list(words), is_split_into_words=True, truncation=True, max_length=self.max_length
        )
        return list(encoding["input_ids"]), list(encoding.word_ids())

    def __call__(self, words: Sequence[str]) -> tuple[list[int], list[int | None]]:
        """Token ids and, per id, the index of its word (None for special tokens)."""
        if self.cached:
            return self._cached_call(words)
        return self._own_call(words)

    def word_counts(self, words: Sequence[str]) -> list[int]:
        """Each word's token count in a prompt of these words, without truncation: from the
        cache, or (cache off) from the tokenizer's own call on the whole list, counted by word
        id."""
        if self.cached:
            return [len(self._word(word)) for word in words]
        counts = [0] * len(words)
        if not words:
            return counts
        encoding = self.tokenizer(
            list(words), is_split_into_words=True, truncation=False, add_special_tokens=False
        )
        for word in encoding.word_ids():
            if word is not None:
                counts[word] += 1
        return counts

    def prompt_length(self, words: Sequence[str]) -> int:
        """Tokens of a prompt of these words with the special tokens, without truncation."""
        return self.special_tokens() + sum(self.word_counts(words))

    def special_tokens(self) -> int:
        """How many special tokens frame a prompt."""
        if self.cached:
            return len(self._prefix) + len(self._suffix)
        framed, bare = (
            self.tokenizer(["a"], is_split_into_words=True, add_special_tokens=special)
            for special in (True, False)
        )
        return len(framed["input_ids"]) - len(bare["input_ids"])

    def prompt(self, words: Sequence[str], num_prompt_words: int) -> tuple[list[int], WordLayout]:
        """Token ids and word layout of a GLiNER prompt: ``num_prompt_words`` label-prompt
        words, then the text's words. With the cache the layout comes from each word's token
        count (:func:`layout_from_counts`), with no list of word ids and no pass over the
        tokens (pre-processing 850 -> 650 us a 384-word request on a 2-core CI machine)."""
        num_words = len(words) - num_prompt_words
        if not self.cached:
            ids, word_ids = self._own_call(words)
            return ids, layout_from_word_ids(word_ids, num_prompt_words, num_words)
        ids, counts = self._cached_counts(words)
        layout = layout_from_counts(
            counts, len(self._prefix), num_prompt_words, num_words, len(ids)
        )
        return ids, layout
