"""The word splitter as compiled here against the library's form of it (one class, the whole
pattern case-insensitive), and the prompt builder's kept schema part."""

import re
import sys

from vllm_factory.models.gliner2.prompts import (
    PromptBuilder,
    _mark_ranges,
    build_prompt,
    choice_prefix,
    split_words,
    tasks_of,
    word_character,
    word_pattern,
)
from vllm_factory.models.gliner2.schema import plan_for


def library_pattern() -> re.Pattern[str]:
    word = rf"[\w{_mark_ranges()}\u200c\u200d]"
    return re.compile(
        rf"(?:https?://[^\s]+|www\.[^\s]+)|[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{{2,}}"
        rf"|@[a-z0-9_]+|{word}+(?:[-_]{word}+)*|\S",
        re.IGNORECASE,
    )


def test_word_character_is_the_library_class_at_every_code_point():
    library = re.compile(rf"[\w{_mark_ranges()}\u200c\u200d]", re.IGNORECASE).fullmatch
    ours = re.compile(word_character()).fullmatch
    differ = [
        code
        for code in range(sys.maxunicode + 1)
        if (library(chr(code)) is None) != (ours(chr(code)) is None)
    ]
    assert differ == []


def test_words_match_the_library_pattern():
    texts = [
        "Mail ANA@Example.org, see WWW.X.io/a-b; HTTPS://Q.com/x İstanbul café",
        "naïve co-operate snake_case @Handle_1 e\u0301t\u00e9 \U0001d165x \u200dzw\u200cj",
        "ΟΔΟΣ Σίσυφος — «quoted» 12.5% $3,000 a--b _x_ 𝔘𝔫𝔦 \U000e0100 end",
        "",
        "   spaced   out   ",
    ]
    library = library_pattern()
    for text in texts:
        expected = [m.span() for m in library.finditer(text)]
        assert [m.span() for m in word_pattern().finditer(text)] == expected
        words = split_words(text)
        normalised = [m for m in library.finditer(words.text)]
        assert words.tokens == [m.group().lower() for m in normalised]
        assert list(zip(words.starts, words.ends)) == [m.span() for m in normalised]


def test_builder_keeps_the_schema_part_and_builds_as_the_one_shot_builder():
    plan = plan_for({
        "entities": ["person", "city"],
        "structures": {"deal": {"fields": [{"name": "kind", "choices": ["buy", "sell"]},
                                           {"name": "price"}]}},
        "classifications": [{"task": "tone", "labels": ["up", "down"]}],
    })  # fmt: skip
    tasks = tasks_of(plan)
    prefix = choice_prefix(plan)
    vocab: dict[str, int] = {}

    def tokenize(item: str) -> list[str]:
        return [piece for piece in item.split(" ") if piece]  # "" -> no sub-token

    def to_ids(pieces: list[str]) -> list[int]:
        return [vocab.setdefault(piece, len(vocab)) for piece in pieces]

    builder = PromptBuilder(tasks, prefix, lambda item: tuple(to_ids(tokenize(item))))
    for text in ["Ana moved to Oslo.", "One   two", ""]:
        words = split_words(text)
        once = build_prompt(tasks, prefix, words, tokenize, to_ids)
        kept = builder.build(words)
        assert kept.token_ids == once.token_ids
        assert kept.layout == once.layout
        assert kept.text_tokens == once.text_tokens
