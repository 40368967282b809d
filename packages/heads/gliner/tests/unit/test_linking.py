"""Candidates -> labels and chunk merging, as glinker's L3 / L4 processors do them."""

import pytest
from vllm_factory.heads.gliner.linking import (
    candidate_labels,
    chunked,
    link,
    merge_chunks,
    template_problem,
)

CANDIDATES = [
    {"id": "a", "label": "Paris", "description": "capital of France"},
    {"id": "b", "label": "paris", "description": "capital of France"},
    {"id": "c", "label": "Paris Hilton"},
    {"id": 4, "label": "Lyon", "description": "city", "kind": "city"},
]


def test_template_labels_first_candidate_per_label_up_to_case():
    labels, owner = candidate_labels(CANDIDATES, "{label}: {description}")
    # "paris: capital of France" equals the first up to case; Paris Hilton has no description
    assert labels == ["Paris: capital of France", "Paris Hilton", "Lyon: city"]
    assert owner == {"Paris: capital of France": 0, "Paris Hilton": 2, "Lyon: city": 3}
    labels, owner = candidate_labels(CANDIDATES, "{label} ({kind})")
    assert labels == ["Paris", "Paris Hilton", "Lyon (city)"]


@pytest.mark.parametrize(
    "template", ["{label.upper}", "{label[0]}", "{label!r}", "{label:>99999}", "plain", "{", "{}"]
)
def test_only_plain_placeholders(template):
    problem = template_problem(template)
    assert problem is not None and problem.startswith("data.template")


def test_plain_template_is_fine():
    assert template_problem("{label}: {description} [{kind}]") is None


def test_chunks():
    assert chunked(["a", "b", "c"], None) == [["a", "b", "c"]]
    assert chunked(["a", "b", "c"], 3) == [["a", "b", "c"]]
    assert chunked(["a", "b", "c"], 2) == [["a", "b"], ["c"]]


def _entity(start, end, label, score):
    return {"start": start, "end": end, "text": "x" * (end - start), "label": label,
            "score": score, "class_probs": {label: score}}  # fmt: skip


def test_rerank_keeps_best_per_span_in_first_place_then_sorts():
    first = [_entity(5, 9, "A", 0.6), _entity(0, 3, "B", 0.9)]
    second = [_entity(5, 9, "C", 0.8), _entity(0, 4, "D", 0.4), _entity(0, 3, "E", 0.2)]
    merged = merge_chunks([first, second], threshold=0.5, rerank=True)
    assert [(e["label"], e["score"]) for e in merged] == [("B", 0.9), ("C", 0.8)]
    # without reranking (one chunk, L3): the threshold and the stable sort alone
    plain = merge_chunks([second], threshold=0.3, rerank=False)
    assert [e["label"] for e in plain] == ["D", "C"]


def test_link_maps_labels_to_candidates_best_first():
    entity = _entity(0, 5, "Paris", 0.9)
    entity["class_probs"] = {"Lyon": 0.2, "Paris": 0.9}
    (linked,) = link([entity], CANDIDATES, {"Paris": 0, "Lyon": 3})
    assert linked["candidate_id"] == "a"
    assert linked["candidates"] == [
        {"id": "a", "label": "Paris", "score": 0.9}, {"id": 4, "label": "Lyon", "score": 0.2},
    ]  # fmt: skip


def test_link_spans_takes_each_span_best_candidate_above_the_threshold():
    import numpy as np
    from vllm_factory.heads.gliner.linking import link_spans

    entities = [{"text": "Tesla", "label": "company"}, {"text": "Austin", "label": "city"}]
    rows = [np.array([0.9, 0.95, 0.1]), np.array([0.2, 0.3, 0.3])]
    linked = link_spans(entities, rows, ["Tesla Inc.", "TSLA", "Austin, TX"], threshold=0.5)
    assert linked[0]["linked_to"] == "TSLA" and linked[0]["linked_score"] == 0.95
    # below the threshold: no link, its best score still given (ties: the first candidate)
    assert linked[1]["linked_to"] is None and linked[1]["linked_score"] == 0.3


def test_a_label_over_the_limit_is_refused_before_it_is_built():
    """The length a template would give each candidate's label is computed from the parts,
    so a long template times many candidates never builds gigabytes before its 400."""
    from vllm_factory.heads.gliner.linking import LabelTooLong, label_length

    candidates = [{"id": 1, "label": "Paris", "description": "x" * 50, "n": 12345}]
    assert label_length("{label}: {description}", candidates[0]) == 5 + 2 + 50
    assert label_length("{label} {n} {n}", candidates[0]) == len("Paris 12345 12345")
    assert label_length("{missing}", candidates[0]) == 5  # the fallback: its own label
    template = "{description}" + "." * 4100
    with pytest.raises(LabelTooLong) as info:
        candidate_labels(candidates * 2048, template, max_chars=4096)
    assert (info.value.index, info.value.length) == (0, 4150)
    assert candidate_labels(candidates, "{label}", max_chars=5) == (["Paris"], {"Paris": 0})
    assert template_problem("{label}" + " " * 5000, max_chars=4096).startswith(
        "data.template: at most 4096"
    )
