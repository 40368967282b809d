import pytest
import torch
from vllm_factory.heads.gliner.decoding import decode_spans, to_entities
from vllm_factory.heads.gliner.prompts import split_words


def scores(num_words: int, max_width: int, num_labels: int, cells: dict) -> torch.Tensor:
    out = torch.zeros(num_words, max_width, num_labels)
    for (start, width, label), value in cells.items():
        out[start, width, label] = value
    return out


def spans(result):
    return [(s.start, s.end, s.label) for s in result]


def test_flat_keeps_best_non_overlapping_sorted_by_start():
    s = scores(5, 3, 2, {(0, 1, 0): 0.9, (1, 0, 1): 0.95, (3, 0, 0): 0.6, (2, 2, 1): 0.7})
    # (1,1) beats (0..1) which overlaps; (2..4) overlaps (3,3)? no: 0.7 > 0.6 so (2..4) kept
    assert spans(decode_spans(s, 5, 0.5)) == [(1, 1, 1), (2, 4, 1)]


def test_threshold_is_strict_and_spans_past_the_text_are_dropped():
    s = scores(3, 3, 1, {(0, 0, 0): 0.5, (2, 1, 0): 0.99, (1, 0, 0): 0.51})
    assert spans(decode_spans(s, 3, 0.5)) == [(1, 1, 0)]


def test_nested_allows_containment_not_partial_overlap():
    s = scores(6, 4, 1, {(0, 3, 0): 0.9, (1, 1, 0): 0.8, (2, 2, 0): 0.7})
    assert spans(decode_spans(s, 6, 0.5, flat_ner=False)) == [(0, 3, 0), (1, 2, 0)]
    assert spans(decode_spans(s, 6, 0.5, flat_ner=True)) == [(0, 3, 0)]


def test_multi_label_keeps_same_span_with_other_labels():
    s = scores(2, 2, 3, {(0, 0, 0): 0.9, (0, 0, 2): 0.8, (0, 1, 1): 0.7})
    assert spans(decode_spans(s, 2, 0.5, multi_label=True)) == [(0, 0, 0), (0, 0, 2)]
    assert spans(decode_spans(s, 2, 0.5)) == [(0, 0, 0)]


def test_ties_keep_row_major_order():
    s = scores(3, 1, 2, {(2, 0, 0): 0.8, (0, 0, 1): 0.8, (0, 0, 0): 0.8})
    assert spans(decode_spans(s, 3, 0.5)) == [(0, 0, 0), (2, 2, 0)]


def test_character_offsets_into_the_original_text():
    text = "  Zoë Müller-Lüdenscheidt, visited São Paulo!"
    words = split_words(text)
    assert [w.text for w in words] == [
        "Zoë",
        "Müller-Lüdenscheidt",
        ",",
        "visited",
        "São",
        "Paulo",
        "!",
    ]
    s = scores(len(words), 3, 2, {(0, 1, 0): 0.9, (4, 1, 1): 0.8})
    entities = to_entities(decode_spans(s, len(words), 0.5), words, ["person", "city"], text)
    assert [(e["text"], e["label"], e["start"], e["end"]) for e in entities] == [
        ("Zoë Müller-Lüdenscheidt", "person", 2, 25),
        ("São Paulo", "city", 35, 44),
    ]
    assert abs(entities[0]["score"] - 0.9) < 1e-6


def plain_greedy(cands: list[tuple], flat_ner: bool, multi_label: bool) -> list[tuple]:
    """gliner's greedy selection written plainly: (start, end, label, score) candidates best
    first, each against every kept span; the kept ones by start."""

    def clash(a, b):
        if (a[0], a[1]) == (b[0], b[1]):
            return not multi_label
        disjoint = a[0] > b[1] or b[0] > a[1]
        if flat_ner:
            return not disjoint
        nested = (a[0] <= b[0] and a[1] >= b[1]) or (b[0] <= a[0] and b[1] >= a[1])
        return not (disjoint or nested)

    kept = []
    for cand in sorted(cands, key=lambda cand: -cand[3]):
        if not any(clash(cand, other) for other in kept):
            kept.append(cand)
    return sorted(kept, key=lambda cand: cand[0])


def greedy_oracle(scores, num_words, threshold, flat_ner, multi_label):
    """gliner's decoding written plainly: every candidate against every kept span."""
    hits = (scores > threshold).nonzero().tolist()
    cands = [(s, s + k, c, float(scores[s, k, c])) for s, k, c in hits if s + k < num_words]
    return plain_greedy(cands, flat_ner, multi_label)


@pytest.mark.parametrize("flat_ner", [True, False])
@pytest.mark.parametrize("multi_label", [True, False])
def test_matches_the_plain_greedy_decoder_on_dense_random_scores(flat_ner, multi_label):
    """Thousands of candidates (an untrained checkpoint's density), ties included."""
    gen = torch.Generator().manual_seed(7)
    for trial in range(20):
        num_words = int(torch.randint(1, 60, (1,), generator=gen))
        s = torch.rand(num_words, 12, 4, generator=gen)
        s = (s * 50).round() / 50  # many exact ties
        expected = greedy_oracle(s, num_words, 0.3, flat_ner, multi_label)
        got = decode_spans(s, num_words, 0.3, flat_ner, multi_label)
        assert [(c.start, c.end, c.label, c.score) for c in got] == expected, trial


@pytest.mark.parametrize("multi_label", [True, False])
def test_nested_decoding_matches_the_plain_decoder_on_long_texts(multi_label):
    """Nested NER on texts of hundreds of words, where kept spans pile up (its clash test
    reads per-word maps of the kept spans, not the kept spans themselves)."""
    gen = torch.Generator().manual_seed(11)
    for num_words, threshold in ((300, 0.9), (200, 0.7), (2, 0.1)):
        s = (torch.rand(num_words, 12, 3, generator=gen) * 100).round() / 100
        expected = greedy_oracle(s, num_words, threshold, False, multi_label)
        got = decode_spans(s, num_words, threshold, False, multi_label)
        assert len(expected) > num_words // 4
        assert [(c.start, c.end, c.label, c.score) for c in got] == expected


def test_input_spans_keep_only_their_cells_and_drop_misaligned_ones():
    """gliner's ``input_spans``: character spans become word spans when they start and end on
    word boundaries (else dropped); only those spans' cells are decoded."""
    from vllm_factory.heads.gliner.decoding import span_filter, word_spans

    text = "Ada Lovelace met Charles Babbage"
    words = split_words(text)
    chars = [(0, 12), (17, 24), (1, 3), (4, 13), (25, 32)]
    assert word_spans(chars, words) == [(0, 1), (3, 3), (4, 4)]
    allowed = span_filter([(0, 1), (3, 3), (4, 4), (1, 9), (0, 7)], 5, 3)
    assert allowed.sum() == 3 and allowed[0, 1] and allowed[3, 0] and allowed[4, 0]
    s = scores(5, 3, 2, {(0, 1, 0): 0.9, (0, 0, 0): 0.95, (3, 0, 1): 0.6, (2, 0, 1): 0.99})
    assert spans(decode_spans(s, 5, 0.5, allowed=allowed)) == [(0, 1, 0), (3, 3, 1)]
    assert spans(decode_spans(s, 5, 0.5, allowed=span_filter([], 5, 3))) == []


def test_class_probs_are_the_five_best_labels_of_the_span_cell():
    labels = ["a", "b", "c", "d", "e", "f"]
    s = scores(2, 2, 6, {(0, 0, i): v for i, v in enumerate([0.2, 0.9, 0.3, 0.8, 0.1, 0.7])})
    words = split_words("x y")
    (entity,) = to_entities(decode_spans(s, 2, 0.85), words, labels, "x y", s)
    assert list(entity["class_probs"]) == ["b", "d", "f", "c", "a"]
    assert entity["class_probs"]["b"] == pytest.approx(0.9)
    assert "class_probs" not in to_entities(decode_spans(s, 2, 0.85), words, labels, "x y")[0]


def test_candidates_above_the_threshold_are_counted_before_they_are_ranked():
    """``max_candidates`` bounds the Python work of a low threshold: over it, an error with the
    count (the IOProcessor's 400 names the threshold); at it, the spans and their count."""
    import pytest
    from vllm_factory.heads.gliner.decoding import TooManyCandidates

    scores = torch.full((4, 2, 3), 0.9)  # every cell above 0.5: 4 * 2 * 3 = 24 candidates
    with pytest.raises(TooManyCandidates) as info:
        decode_spans(scores, 4, 0.5, max_candidates=23)
    assert info.value.count == 24
    kept = decode_spans(scores, 4, 0.5, max_candidates=24)
    assert kept.candidates == 21  # the cells whose span ends inside the text
    assert kept == decode_spans(scores, 4, 0.5)


@pytest.mark.parametrize("max_width", [1, 3, 12])
def test_spans_inside_counts_what_the_decoder_can_keep(max_width):
    """The spans a threshold of 0 keeps (the IOProcessor refuses such a request on this count
    before the model runs): every (start, width) whose span ends inside the text."""
    from vllm_factory.heads.gliner.io_processor import spans_inside

    for words in range(30):
        inside = sum(1 for s in range(words) for k in range(max_width) if s + k < words)
        assert spans_inside(words, max_width) == inside
