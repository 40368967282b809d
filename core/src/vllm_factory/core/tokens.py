"""Texts tokenized as far as the model reads them, no further (pure Python; no vLLM).

A model truncates its input at a token limit, but a tokenizer given a whole text tokenizes all
of it first: a request of long documents would cost the API server's event loop (where vLLM
runs IOProcessors) time for tokens that are thrown away. A text is therefore cut first, at a
space after ``CHARS_PER_TOKEN`` characters per token of the limit, and only that part is
tokenized; while the cut part yields fewer tokens than the limit keeps (text with long words),
the cut moves further (``GROWTH`` times), up to the whole text.

Tokens never span whitespace in the tokenizers served here (WordPiece, SentencePiece and
byte-level BPE all split on it first), so the tokens of a part cut at a space are the first
tokens of the whole text: truncated to the limit, they are what the whole text gives. Only a run
of non-space characters longer than :data:`SEARCH` is cut inside (a pathological text).
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Characters per token of the limit before the first cut: prose averages 4 - 5 per token.
CHARS_PER_TOKEN = 12
GROWTH = 4
# How far past the cut point a space is looked for.
SEARCH = 1024
_SPACE = re.compile(r"\s")


def cut_at_space(text: str, chars: int) -> str:
    """``text`` up to the first whitespace at or after ``chars`` characters (within
    :data:`SEARCH` more; else exactly ``chars``), or all of it when it is not longer."""
    if len(text) <= chars:
        return text
    space = _SPACE.search(text, chars, chars + SEARCH)
    return text[: space.start() if space else chars]


def first_cut(text: str, tokens: int) -> int:
    """How many characters of ``text`` the first cut for a ``tokens`` limit keeps (what a
    request's character budget counts)."""
    return len(cut_at_space(text, tokens * CHARS_PER_TOKEN))


def tokenize_cut(tokenize: Callable[[str], list[int]], text: str, tokens: int) -> list[int]:
    """``tokenize(text)`` for a ``tokenize`` that truncates to ``tokens`` ids, computed on the
    shortest part of ``text`` (cut as the module docstring says) that fills the limit."""
    chars = tokens * CHARS_PER_TOKEN
    while True:
        part = cut_at_space(text, chars)
        ids = tokenize(part)
        if len(part) == len(text) or len(ids) >= tokens:
            return ids
        chars *= GROWTH
