"""The long-text parity cases (:mod:`~vllm_factory.testing.gliner.long_text`): texts of 1, 2.5
and 10 windows of a checkpoint's ``max_len`` words with unicode words and odd whitespace at
every window border, the same text in every decoding mode, without overlap and with
``input_spans`` across the borders, a token-dense text (long numbers and rare words: windows of
``max_len`` words would hold more tokens than a prompt leaves, so windows end at the token room)
and a 10,000-word text in paragraphs. gliner's reference
for them is cached on this module's text (edit the tests without rebuilding it)."""

from __future__ import annotations

from vllm_factory.heads.gliner.prompts import split_words

LABELS = ["person", "organization", "location", "date", "product"]
# The 10,000-word case's candidates: a trained GLiNER finds about one entity per eight words,
# with a few overlapping candidates each (~1.5 % of 10,000 words x 8 widths x 3 labels).
CANDIDATE_SHARE = 0.015
# One splitter word each: ASCII, hyphenated, accented, CJK, emoji, punctuation.
POOL = ["Ada", "Lovelace", "met", "Charles", "Babbage", "in", "London", "on", "June", "1833",
        ",", "state-of-the-art", "Apple", "engines", "."]  # fmt: skip
BORDER_WORDS = ["Zoë", "Ærøskøbing", "東京", "😀", "Đà", "Kraków", "𝄞", "—", "naïve-café"]
BORDER_GAPS = ["\n", "\t ", "  ", "\u00a0", " \u3000 ", "\r\n"]


def make_text(num_words: int, borders: set[int], salt: int = 0, paragraph: int = 0) -> str:
    """``num_words`` splitter words; around each index of ``borders`` unicode words and odd
    whitespace; a blank line every ``paragraph`` words."""
    parts = [" \n"]
    for i in range(num_words):
        near = i in borders or i - 1 in borders
        word = BORDER_WORDS[(i + salt) % len(BORDER_WORDS)] if near else POOL[(7 * i + salt) % 15]
        gap = BORDER_GAPS[(i + salt) % len(BORDER_GAPS)] if near else " "
        if paragraph and i % paragraph == paragraph - 1:
            gap = "\n\n"
        parts += [word, gap]
    return "".join(parts)


# Long digit runs and rare letter strings: many tokens per word for any tokenizer.
DENSE_WORDS = ["4738291056", "qzxvjk", "90817263544", "Ada", "wqpxzt", "31415926535", "Lovelace",
               "xkcdqv", "London", "1833"]  # fmt: skip


def dense_text(num_words: int) -> str:
    """``num_words`` words, most of them long numbers or rare letter strings."""
    return " ".join(DENSE_WORDS[i % len(DENSE_WORDS)] for i in range(num_words)) + "\n"


def window_borders(num_words: int, max_len: int, overlap: int) -> set[int]:
    """Each window's first and last word."""
    stride, found = max_len - overlap, set()
    for start in range(0, num_words, stride):
        found |= {start, min(start + max_len, num_words) - 1}
    return found


def make_cases(max_len: int, max_width: int) -> dict[str, dict]:
    overlap = max_len // 4  # the served default
    stride = max_len - overlap
    sizes = {"one": max_len - 5, "two_and_half": max_len + stride + stride // 2,
             "ten": max_len + 9 * stride}  # fmt: skip
    base = {"labels": LABELS, "threshold": 0.3, "overlap": overlap, "flat_ner": True,
            "multi_label": False}  # fmt: skip
    cases = {}
    for salt, (name, n) in enumerate(sizes.items()):
        text = make_text(n, window_borders(n, max_len, overlap), salt)
        cases[name] = {**base, "text": text}
    half = cases["two_and_half"]["text"]
    cases["nested"] = {**cases["two_and_half"], "flat_ner": False}
    cases["multi_label"] = {**cases["two_and_half"], "multi_label": True, "threshold": 0.1}
    cases["no_overlap"] = {**cases["two_and_half"], "overlap": 0}
    # input spans of 1 to max_width words from every other word: many cross a border
    words = split_words(half)
    spans = [[words[i].start, words[min(len(words) - 1, i + i // 2 % max_width)].end]
             for i in range(0, len(words), 2)]  # fmt: skip
    cases["input_spans"] = {**cases["two_and_half"], "threshold": 0.1, "input_spans": spans}
    # windows end at the token room, not at max_len words; and a text of max_len words that
    # does not fit a prompt's tokens is read in windows too
    # (0.01: the tiny mT5 checkpoint scores these texts at most ~0.02)
    cases["dense"] = {**base, "threshold": 0.01, "text": dense_text(3 * max_len)}
    cases["dense_short"] = {**base, "threshold": 0.01, "text": dense_text(max_len)}
    n = 10_000
    text = make_text(n, window_borders(n, max_len, overlap), 3, paragraph=97)
    # its threshold: the score above which CANDIDATE_SHARE of the (span, label) cells of gliner's
    # scores lie, as dense as a trained model's candidates (a random checkpoint scores nearly
    # every cell above 0.5, and gliner's greedy_search is quadratic in its candidates)
    cases["ten_thousand"] = {**base, "labels": LABELS[:3], "threshold": None,
                             "candidate_share": CANDIDATE_SHARE, "text": text}  # fmt: skip
    return cases
