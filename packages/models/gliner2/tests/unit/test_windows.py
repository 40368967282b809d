"""Windows of long texts and the merge of their results (gliner2's ``extract_long`` rules)."""

from vllm_factory.models.gliner2.windows import (
    Window,
    fitted_overlap,
    merge_windows,
    smaller_size,
    split_windows,
)


def test_windows_cover_the_text_with_the_overlap_asked():
    text = "one two  three\tfour\n\nfive six seven"
    windows = split_windows(text, 3, 1)
    assert [w.text for w in windows] == ["one two  three", "three\tfour\n\nfive", "five six seven"]
    assert all(text[w.start : w.start + len(w.text)] == w.text for w in windows)
    assert split_windows("  ", 3, 1) == [Window("  ", 0)]
    assert split_windows("a b", 3, 1) == [Window("a b", 0)]


def span(text: str, start: int, confidence: float) -> dict:
    return {"text": text, "confidence": confidence, "start": start, "end": start + len(text)}


def test_entities_keep_the_best_non_overlapping_spans_at_document_offsets():
    document = "Ada met Bob in Rome"
    windows = [Window("Ada met Bob", 0), Window("Bob in Rome", 8)]
    results = [
        {"entities": {"person": [span("Ada", 0, 0.9), span("Bob", 8, 0.6)], "city": []}},
        {"entities": {"person": [span("Bob", 0, 0.8), span("Bob in", 0, 0.7)],
                      "city": [span("Rome", 7, 0.95)]}},
    ]  # fmt: skip
    merged = merge_windows(document, windows, results, include_confidence=True,
                           include_spans=True)  # fmt: skip
    assert merged["entities"]["person"] == [span("Ada", 0, 0.9), span("Bob", 8, 0.8)]
    assert merged["entities"]["city"] == [span("Rome", 15, 0.95)]
    plain = merge_windows(document, windows, results, include_confidence=False,
                          include_spans=False)  # fmt: skip
    assert plain == {"entities": {"person": ["Ada", "Bob"], "city": ["Rome"]}}


def test_classes_take_the_most_confident_window_and_relations_stay_in_their_window():
    windows = [Window("a", 0), Window("b", 2)]
    results = [
        {"tone": {"label": "calm", "confidence": 0.6},
         "relation_extraction": {"knows": [{"head": span("a", 0, 0.9), "tail": span("a", 0, 0.8)}]}},
        {"tone": {"label": "angry", "confidence": 0.7}, "relation_extraction": {"knows": []}},
    ]  # fmt: skip
    merged = merge_windows("a b", windows, results, include_confidence=False, include_spans=False)
    assert merged == {
        "tone": "angry",
        "relation_extraction": {"knows": [{"head": "a", "tail": "a"}]},
    }


def test_windows_left_to_the_server_shrink_with_their_text_tokens():
    # 384 words took 700 tokens, 100 of them the schema's: 500 of 600 text tokens fit.
    assert smaller_size(384, 700, 512, 100) == 384 * 412 // 600
    assert smaller_size(10, 11, 10, 0) == 9  # always fewer words than the window that failed
    assert smaller_size(10, 400, 10, 0) == 1
    assert smaller_size(384, 700, 100, 100) is None  # the schema alone fills the server
    assert smaller_size(1, 700, 512, 100) is None
    assert fitted_overlap(200, 64) == 64
    assert fitted_overlap(48, 64) == 8  # scaled as the window: 64 of 384
    assert fitted_overlap(2, 64) == 0 and fitted_overlap(64, 64) == 10
