import torch
from vllm_factory.heads.gliner.prompts import (
    LAYOUT_KEY,
    WordLayout,
    layout_for,
    layout_from_word_ids,
    prompt_key,
    prompt_words,
    split_words,
    unique_labels,
)


def test_split_words_like_gliner_whitespace_splitter():
    words = split_words("state-of-the-art e_mail, 3.5% ok")
    assert [w.text for w in words] == ["state-of-the-art", "e_mail", ",", "3", ".", "5", "%", "ok"]
    assert len(split_words("a b c d", max_len=2)) == 2


def test_split_words_are_the_patterns_matches_with_their_offsets():
    """One ``split`` call and running offsets give exactly ``finditer``'s matches: texts with
    leading / trailing / mixed whitespace, scripts, accents, emoji, joined words, lone marks."""
    import random

    from vllm_factory.heads.gliner.prompts import WORD_PATTERN, Word

    pool = ["state-of-the-art", "e_mail", "naïve", "東京", "Москва", "U.S.A.", "don't", "3.5%",
            "__x__", "a-", "-b", "🙂", "x", ",", "(", "$4.5m", "\u00a0", "tab\tbed", "Zürich"]  # fmt: skip
    rng = random.Random(0)
    texts = ["", " ", "\n\t ", "one", "  lead and trail  "]
    texts += [rng.choice(["", " ", "  ", "\n"]).join(rng.choices(pool, k=rng.randint(1, 60)))
              + rng.choice(["", " ", "\n "]) for _ in range(300)]  # fmt: skip
    for text in texts:
        expected = [Word(m.group(), m.start(), m.end()) for m in WORD_PATTERN.finditer(text)]
        got = split_words(text)
        assert got == expected and all(type(w) is Word for w in got)
        assert all(text[w.start : w.end] == w.text for w in got)
        for limit in (0, 1, 7):
            assert split_words(text, limit) == expected[:limit]


def test_text_words_is_a_sequence_of_words_made_on_lookup():
    """``split_words`` keeps strings and offsets; every way a caller reads it (index, negative
    index, slice, iteration, ``texts``) gives the ``Word`` values the splitter defines."""
    import pytest
    from vllm_factory.heads.gliner.prompts import WORD_PATTERN, TextWords, Word

    text = "  Ada met Bob, in  London. "
    words = split_words(text)
    expected = [Word(m.group(), m.start(), m.end()) for m in WORD_PATTERN.finditer(text)]
    assert isinstance(words, TextWords) and len(words) == len(expected) == 7
    assert words.texts == [w.text for w in expected]
    assert words[0] == expected[0] and words[-1] == expected[-1] and words[3] == Word(",", 13, 14)
    assert words[2:5] == expected[2:5] and words[::-2] == expected[::-2]
    assert list(words) == expected and words == expected and words != expected[:-1]
    assert words.bounds(0, 0) == (2, 5) and words.bounds(2, 6) == (expected[2].start, 26)
    with pytest.raises(IndexError):
        words[7]
    with pytest.raises(IndexError):
        words[-8]
    cut = split_words(text, max_len=3)
    assert cut.texts == ["Ada", "met", "Bob"] and cut[-1] == expected[2]


def test_layout_from_counts_numbers_words_as_layout_from_word_ids():
    """Words with no token (zero counts, or cut by truncation) shift the numbering as gliner's
    word mask does, in the prompt and in the text, for random counts, frames and cuts."""
    import random

    from vllm_factory.heads.gliner.prompts import layout_from_counts

    rng = random.Random(0)
    for _ in range(2000):
        prompt_words, text_words = rng.randint(0, 6), rng.randint(0, 12)
        counts = [rng.choice([0, 1, 1, 2, 3]) for _ in range(prompt_words + text_words)]
        prefix, suffix = rng.randint(0, 2), rng.randint(0, 2)
        word_ids = [w for w, c in enumerate(counts) for _ in range(c)]
        cut = rng.randint(0, len(word_ids))  # right truncation: the counts it leaves
        word_ids = word_ids[:cut]
        kept = [word_ids.count(w) for w in range(len(counts))]
        framed = [None] * prefix + word_ids + [None] * suffix
        expected = layout_from_word_ids(framed, prompt_words, text_words)
        got = layout_from_counts(kept, prefix, prompt_words, text_words, len(framed))
        assert got == expected, (counts, cut, prefix, suffix)


def test_prompt_words_and_unique_labels():
    labels = unique_labels(["a", "b", "a"])
    assert labels == ["a", "b"]
    assert prompt_words(labels, "<E>", "<S>") == ["<E>", "a", "<E>", "b", "<S>"]


def test_layout_counts_subtokens_per_text_word():
    # [CLS] <E> lab lab <S> w0 w1 w1 w2 [SEP]; prompt words: 0..2
    word_ids = [None, 0, 1, 1, 2, 3, 4, 4, 5, None]
    layout = layout_from_word_ids(word_ids, num_prompt_words=3, num_words=3)
    assert layout == WordLayout(5, (1, 2, 1))


def test_layout_after_truncation_and_empty_words():
    # word 4 truncated away entirely; word 1 of 3 produced no token: gliner shifts numbering
    layout = layout_from_word_ids([None, 0, 1, 2, 2, None], num_prompt_words=1, num_words=4)
    assert layout == WordLayout(2, (1, 2, 0, 0))
    assert layout_from_word_ids([None, 0, None], 1, 2) == WordLayout(3, (0, 0))


def test_wire_round_trip_and_lookup():
    layout = WordLayout(7, (1, 3, 1))
    assert isinstance(layout.to_wire(), bytes) and len(layout.to_wire()) == 16
    assert WordLayout.from_wire(layout.to_wire()) == layout
    assert WordLayout.from_wire([7, 1, 3, 1]) == layout  # the older list form
    big = WordLayout(70_000, (300, 0, 1))  # past 16 bits
    assert WordLayout.from_wire(big.to_wire()) == big
    ids = torch.tensor([2, 10, 11, 3])
    extra = {LAYOUT_KEY: {prompt_key([2, 10, 11, 3]): layout.to_wire()}}
    assert layout_for(extra, ids) == layout
    assert prompt_key([1, 2]) != prompt_key([2, 1])


def test_lookup_without_a_layout_is_none_never_an_error():
    ids = torch.tensor([2, 10, 11, 3])
    assert layout_for({}, ids) is None  # vLLM's start-up dummy runs carry no extra data
    assert layout_for(None, ids) is None
    assert layout_for({LAYOUT_KEY: {prompt_key([9]): [0, 1]}}, ids) is None  # other prompt
    for malformed in (
        [-1], [], [3, [1, 2]], [3, 1.5], ["3", "1"], [[3, 1]], None, "31", b"", b"\x01\x02\x03",
    ):  # fmt: skip
        assert layout_for({LAYOUT_KEY: {prompt_key(ids): malformed}}, ids) is None, malformed
    assert layout_for({LAYOUT_KEY: {prompt_key(ids): [1, 2, 0]}}, ids) == WordLayout(1, (2, 0))
    assert WordLayout(2, (1, 1)).fits(4) and not WordLayout(2, (1, 2)).fits(4)
