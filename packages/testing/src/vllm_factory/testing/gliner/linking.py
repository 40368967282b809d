"""Entity linking in the library's terms (``data.candidates``) against the real server: the
links are the entities of the same labels sent as ``data.labels``, each mapped to the
candidate its label came from; reranking chunks (``data.max_labels``) match the chunks sent
one by one; bad linking input is a 400 naming the field. glinker's own L3 / L4 results for
the same candidates are compared in :mod:`vllm_factory.testing.gliner.glinker`."""

from __future__ import annotations

import math

from vllm_factory.heads.gliner.request import MAX_LABELS_PER_REQUEST

__all__ = [
    "test_a_thousand_candidates_are_linked",
    "test_linking_equals_labels_with_candidate_ids",
    "test_reranking_chunks_equal_chunks_one_by_one",
]

TEXT = "Angela Merkel met Emmanuel Macron in Berlin on Monday; Paris and Berlin signed."
TEMPLATE = "{label}: {description}"
CANDIDATES = [
    {"id": "Q567", "label": "Angela Merkel", "description": "chancellor of Germany"},
    {"id": "Q3052772", "label": "Emmanuel Macron", "description": "president of France"},
    {"id": "Q64", "label": "Berlin", "description": "capital of Germany"},
    {"id": 90, "label": "Paris", "description": "capital of France", "kind": "city"},
    # the same label up to case: links go to the first candidate of a label
    {"id": "Q90-dup", "label": "paris", "description": "Capital of France", "kind": "city"},
    {"id": "Q-Pa", "label": "Paris Hilton"},  # no description: the template falls back
    {"id": "Q-mon", "label": "Monday", "description": "day of the week"},
    {"id": "Q-é", "label": "Zoë Ünal", "description": "ficción, 東京"},
    # the same candidate again (glinker's L2 lists an entity once per mention): one candidate
    {"id": "Q64", "label": "Berlin", "description": "capital of Germany"},
]
LINKING_BAD_INPUTS = [
    ({"text": "x", "candidates": []}, "data.candidates"),
    ({"text": "x", "candidates": [{"id": "a", "label": "A"}, {"id": "a", "label": "B"}]},
     "data.candidates"),
    ({"text": "x", "candidates": [{"id": "a", "label": "A", "description": "d"},
                                  {"id": "a", "label": "A", "description": "e"}]},
     "data.candidates"),
    ({"text": "x", "labels": ["a"], "candidates": [{"id": "a", "label": "A"}]},
     "data.candidates"),
    ({"text": "x", "candidates": [{"id": "a"}]}, "data.candidates"),
    ({"text": "x", "candidates": [{"id": 1.5, "label": "A"}]}, "data.candidates"),
    ({"text": "x", "candidates": [{"id": "a", "label": " "}]}, "data.candidates"),
    ({"text": "x", "candidates": [{"id": "a", "label": "A", "description": "d" * 5000}],
      "template": TEMPLATE}, "data.candidates[0]"),
    ({"text": "x", "candidates": [{"id": "a", "label": "A"}], "template": "{label.upper}"},
     "data.template"),
    ({"text": "x", "candidates": [{"id": "a", "label": "A"}], "template": "{label:>999999}"},
     "data.template"),
    ({"text": "x", "candidates": [{"id": "a", "label": "A"}], "template": "no field"},
     "data.template"),
    ({"text": "x", "candidates": [{"id": "a", "label": "A"}], "max_labels": 0},
     "data.max_labels"),
    ({"text": "x", "labels": ["a"], "max_labels": 2}, "data.max_labels"),
    ({"text": "x", "labels": ["a"], "template": "{label}"}, "data.template"),
    ({"text": "x", "candidates": [{"id": f"c{i}", "label": f"c{i}"}
                                  for i in range(MAX_LABELS_PER_REQUEST + 1)]},
     "data.candidates"),
]  # fmt: skip


def _labels(candidates: list[dict], template: str) -> tuple[list[str], dict[str, object]]:
    """The labels a candidate list gives (written out for this test's candidates: first
    label up to case wins, a missing field falls back to the label)."""
    labels, owner = [], {}
    for candidate in candidates:
        try:
            label = template.format(**candidate)
        except KeyError:
            label = candidate["label"]
        if label.lower() not in {known.lower() for known in labels}:
            labels.append(label)
            owner[label] = candidate["id"]
    return labels, owner


def _same(a: dict, b: dict) -> None:
    assert (a["start"], a["end"], a["text"], a["label"]) == (
        b["start"], b["end"], b["text"], b["label"],
    )  # fmt: skip
    assert math.isclose(a["score"], b["score"], abs_tol=1e-5)
    assert list(a["class_probs"]) == list(b["class_probs"])


def test_linking_equals_labels_with_candidate_ids(ner):
    labels, owner = _labels(CANDIDATES, TEMPLATE)
    assert len(labels) == len(CANDIDATES) - 2 and "Paris Hilton" in labels
    common = {"text": [TEXT, TEXT.upper()], "threshold": 0.05}
    linked = ner({**common, "candidates": CANDIDATES, "template": TEMPLATE})
    plain = ner({**common, "labels": labels, "return_class_probs": True})
    assert sum(map(len, linked)) > 0
    for links, entities in zip(linked, plain):
        assert len(links) == len(entities)
        for link, entity in zip(links, entities):
            _same(link, entity)
            assert link["candidate_id"] == owner[link["label"]]
            assert [c["label"] for c in link["candidates"]] == list(entity["class_probs"])
            assert [c["id"] for c in link["candidates"]] == [
                owner[label] for label in entity["class_probs"]
            ]
            assert [c["score"] for c in link["candidates"]] == sorted(
                (c["score"] for c in link["candidates"]), reverse=True
            )


def test_reranking_chunks_equal_chunks_one_by_one(ner):
    """``max_labels``: glinker's L4 rule, written out here — each chunk scored on its own,
    the chunks' entities concatenated, the best per span kept where the span first
    appeared, then sorted by start."""
    labels, owner = _labels(CANDIDATES, "{label}")
    common = {"text": TEXT, "threshold": 0.05}
    reranked = ner({**common, "candidates": CANDIDATES, "max_labels": 3})  # one text: its links
    found = []
    for i in range(0, len(labels), 3):
        entities = ner({**common, "labels": labels[i : i + 3], "return_class_probs": True})
        found += entities
    best: dict[tuple, dict] = {}
    for entity in found:
        key = (entity["text"], entity["start"], entity["end"])
        if key not in best or entity["score"] > best[key]["score"]:
            best[key] = entity
    expected = sorted(best.values(), key=lambda entity: entity["start"])
    assert len(reranked) == len(expected) > 0
    for link, entity in zip(reranked, expected):
        _same(link, entity)
        assert link["candidate_id"] == owner[link["label"]]


def test_a_thousand_candidates_are_linked(ner):
    """Every candidate of a text in one request: a bi-encoder scores each label on its own,
    a uni-encoder scores them in chunks of ``max_labels`` (without it, over 256 is a 400;
    chunks of 8 fit the tiny checkpoints' 160-token prompts)."""
    candidates = [
        {"id": i, "label": f"candidate {i}", "description": f"entry {i} of a knowledge base"}
        for i in range(1000)
    ]
    links = ner({"text": TEXT, "candidates": candidates, "max_labels": 8, "threshold": 0.0})
    assert links
    for link in links:
        assert link["label"] == candidates[link["candidate_id"]]["label"]
        assert all(c["label"] == candidates[c["id"]]["label"] for c in link["candidates"])
