"""Long texts in windows: the windows, the words each one reads, and the merge."""

import pytest
import torch
from vllm_factory.heads.gliner.decoding import decode_spans
from vllm_factory.heads.gliner.prompts import split_words
from vllm_factory.heads.gliner.request import GLiNERRequest
from vllm_factory.heads.gliner.windows import (
    default_overlap,
    merge_scores,
    split_text,
    sub_words,
    window_bounds,
    words_within,
)


@pytest.mark.parametrize(
    ("words", "max_len", "overlap", "expected"),
    [
        (5, 10, 2, [(0, 5)]),
        (10, 10, 2, [(0, 10)]),
        (11, 10, 2, [(0, 10), (8, 11)]),
        (25, 10, 2, [(0, 10), (8, 18), (16, 25)]),
        (24, 10, 2, [(0, 10), (8, 18), (16, 24)]),
        (3, 1, 0, [(0, 1), (1, 2), (2, 3)]),
        (0, 10, 2, [(0, 0)]),
    ],
)
def test_windows_start_at_multiples_of_the_stride_and_end_at_the_text_end(
    words, max_len, overlap, expected
):
    assert window_bounds(words, max_len, overlap) == expected
    assert len(expected) == 1 or words <= words_within(len(expected), max_len, overlap)
    assert words > words_within(len(expected) - 1, max_len, overlap) or len(expected) == 1


def test_default_overlap_is_a_quarter_of_max_len():
    assert default_overlap(384) == 96
    assert default_overlap(48) == 12
    assert default_overlap(1) == 0


def test_a_window_reads_its_words_with_offsets_into_the_whole_text():
    text = "  Zoë  met\tBjörn-Ærø in 東京 , then   left. "
    words = split_words(text)
    for first in range(len(words)):
        for end in range(first + 1, len(words) + 1):
            part = sub_words(words, first, end)
            assert list(part) == list(words)[first:end]
            assert part.bounds(0, end - first - 1) == (words[first].start, words[end - 1].end)


@pytest.mark.parametrize("mode", ["truncate", "error"])
def test_truncate_keeps_the_first_max_len_words_as_before(mode):
    text = "one two three four five six"
    kept = split_text(text, 4, mode, 1, 10)
    assert kept.truncated and kept.bounds == [(0, 4)]
    assert list(kept.words) == list(split_words(text, 4))
    fits = split_text(text, 6, mode, 1, 10)
    assert not fits.truncated and list(fits.words) == list(split_words(text))


def test_window_mode_splits_the_whole_text_up_to_the_bound():
    text = " ".join(str(i) for i in range(30))
    windows = split_text(text, 10, "window", 2, 100)
    assert len(windows.words) == 30 and not windows.truncated
    assert windows.bounds == window_bounds(30, 10, 2)
    assert [w.texts[0] for w in windows.window_words()] == ["0", "8", "16", "24"]
    assert len(split_text(text, 10, "window", 2, 12).words) == 13  # the bound + 1: refused


def _candidates(parts, bounds, threshold):
    """Every window's cells above the threshold whose span ends inside it, moved to the whole
    text, duplicates keeping the higher score: the rule merge_scores implements."""
    best = {}
    for (first, end), scores in zip(bounds, parts):
        for s, w, label in torch.nonzero(scores > threshold).tolist():
            if s + w < end - first:
                key = (first + s, first + s + w, label)
                best[key] = max(best.get(key, 0.0), float(scores[s, w, label]))
    return best


@pytest.mark.parametrize("flat_ner", [True, False])
@pytest.mark.parametrize("multi_label", [True, False])
def test_merged_scores_decode_as_the_merged_candidate_list(flat_ner, multi_label):
    generator = torch.Generator().manual_seed(0)
    bounds = window_bounds(23, 8, 3)
    parts = [torch.rand(end - first, 4, 3, generator=generator) for first, end in bounds]
    merged = merge_scores(parts, bounds, 23)
    threshold = 0.6
    expected = _candidates(parts, bounds, threshold)
    kept = decode_spans(merged, 23, threshold, flat_ner, multi_label)
    assert kept.candidates == len(expected)
    for span in kept:
        assert expected[(span.start, span.end, span.label)] == pytest.approx(span.score, abs=0)
    # gliner's greedy over that list, written out: best first, ties in (start, end, label)
    # order; flat NER refuses any overlap, nested only partial ones; same span: multi-label
    order = sorted(expected.items(), key=lambda item: -item[1])
    chosen = []
    for (start, end, label), score in order:
        clash = False
        for s, e, _ in chosen:
            same = (s, e) == (start, end)
            overlap = start <= e and s <= end
            nested = (s <= start and end <= e) or (start <= s and e <= end)
            if same:
                clash = not multi_label
            elif flat_ner:
                clash = overlap
            else:
                clash = overlap and not nested
            if clash:
                break
        if not clash:
            chosen.append((start, end, label))
    assert sorted(chosen) == sorted((s.start, s.end, s.label) for s in kept)


def test_one_window_is_returned_unchanged():
    scores = torch.rand(5, 4, 2)
    assert merge_scores([scores], [(0, 5)], 5) is scores


def test_request_fields():
    request = GLiNERRequest(text="a", labels=["x"])
    assert request.long_text is None and request.window_overlap is None
    assert request.return_windows is False
    GLiNERRequest(text="a", labels=["x"], long_text="window", window_overlap=0)
    for bad in ({"long_text": "cut"}, {"window_overlap": -1}, {"window_overlap": 1.5},
                {"return_windows": "yes"}):  # fmt: skip
        with pytest.raises(ValueError):
            GLiNERRequest(text="a", labels=["x"], **bad)


def _covered(bounds: list[tuple[int, int]], num_words: int) -> bool:
    return {i for first, end in bounds for i in range(first, end)} == set(range(num_words))


def test_windows_end_where_the_token_room_ends():
    """Windows hold at most max_len words whose tokens fit the room; the next starts overlap
    words before the end; every word is read."""
    counts = [3] * 40  # 4 words fill a room of 12 tokens, max_len 10 never binds
    bounds = window_bounds(40, 10, 2, counts, 12)
    assert bounds[:3] == [(0, 4), (2, 6), (4, 8)] and bounds[-1][1] == 40
    assert _covered(bounds, 40)
    for first, end in bounds:
        assert sum(counts[first:end]) <= 12 and end - first <= 10
    # a room that binds nowhere: the word rule as before
    assert window_bounds(30, 10, 2, [1] * 30, 100) == window_bounds(30, 10, 2)


def test_a_text_that_fits_words_and_tokens_is_one_window():
    assert window_bounds(8, 10, 2, [1] * 8, 8) == [(0, 8)]
    # within max_len words but not within the room: windows too
    assert window_bounds(8, 10, 2, [2] * 8, 8) == [(0, 4), (2, 6), (4, 8)]


def test_room_smaller_than_the_overlap_advances_one_word():
    """A window of overlap words or fewer: the next starts one word after its start; a word
    wider than the room is a window of its own."""
    counts = [5, 1, 9, 1, 1, 5, 5]
    bounds = window_bounds(7, 10, 3, counts, 5)
    assert bounds == [(0, 1), (1, 2), (2, 3), (3, 5), (4, 5), (5, 6), (6, 7)]
    assert _covered(bounds, 7)


@pytest.mark.parametrize("seed", range(20))
def test_random_token_counts_read_every_word_within_the_bounds(seed):
    import random

    rng = random.Random(seed)
    num_words, max_len = rng.randint(1, 300), rng.randint(2, 40)
    overlap, room = rng.randint(0, max_len // 2), rng.randint(1, 60)
    counts = [rng.choice([0, 1, 1, 2, 3, 7, 15]) for _ in range(num_words)]
    bounds = window_bounds(num_words, max_len, overlap, counts, room)
    assert _covered(bounds, num_words)
    for k, (first, end) in enumerate(bounds):
        assert end - first <= max_len
        assert sum(counts[first:end]) <= room or end - first == 1
        if k:
            assert bounds[k - 1][0] < first <= bounds[k - 1][1]
    assert num_words <= words_within(len(bounds), max_len, overlap)
    capped = window_bounds(num_words, max_len, overlap, counts, room, max_windows=2)
    assert capped == bounds[:2]


def test_split_text_by_tokens_in_every_mode():
    text = "aa b cc d ee f"  # two-letter words are two tokens
    count = lambda words: [len(w) for w in words]
    whole = split_text(text, 10, "window", 1, 100, count, 4)
    assert whole.bounds == [(0, 2), (1, 4), (3, 6)] and not whole.truncated
    assert len(whole.words) == 6
    fits = split_text(text, 10, "window", 1, 100, count, 9)
    assert fits.bounds == [(0, 6)]
    for mode in ("truncate", "error"):
        cut = split_text(text, 10, mode, 1, 100, count, 4)
        assert cut.bounds == [(0, 6)] and cut.truncated  # gliner's cut: a word not read whole
        assert not split_text(text, 10, mode, 1, 100, count, 9).truncated
