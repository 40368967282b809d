"""Texts cut before tokenizing: the same truncated tokens as the whole text, for less work."""

from vllm_factory.core.tokens import (
    CHARS_PER_TOKEN,
    SEARCH,
    cut_at_space,
    first_cut,
    tokenize_cut,
)


def truncating(limit: int, seen: list[int]):
    """A tokenizer splitting on whitespace and keeping ``limit`` tokens; records the length of
    each text it was given."""

    def tokenize(text: str) -> list[int]:
        seen.append(len(text))
        return [len(word) for word in text.split()][:limit]

    return tokenize


def test_cut_at_the_first_space_after_the_mark():
    assert cut_at_space("aaa bbb ccc", 5) == "aaa bbb"
    assert cut_at_space("aaa bbb", 50) == "aaa bbb"
    assert cut_at_space("x" * 5000, 10) == "x" * 10  # no space near: cut inside the run


def test_long_prose_is_tokenized_as_far_as_the_limit_reads():
    text = " ".join(f"w{i % 97}" for i in range(50_000))
    seen: list[int] = []
    ids = tokenize_cut(truncating(64, seen), text, 64)
    assert ids == truncating(64, [])(text)  # what the whole text gives
    assert seen == [first_cut(text, 64)] and seen[0] <= 64 * CHARS_PER_TOKEN + SEARCH


def test_long_words_move_the_cut_until_the_limit_is_filled():
    text = " ".join(["x" * 100] * 2000)
    seen: list[int] = []
    ids = tokenize_cut(truncating(64, seen), text, 64)
    assert ids == [100] * 64
    assert len(seen) > 1 and seen == sorted(seen) and seen[-1] < len(text)


def test_short_texts_are_tokenized_whole():
    seen: list[int] = []
    assert tokenize_cut(truncating(64, seen), "a few words", 64) == [1, 3, 5]
    assert seen == [len("a few words")]
