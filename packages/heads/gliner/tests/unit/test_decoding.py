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
