"""Served entities and relations vs gliner's ``predict_relations`` on a relex checkpoint
(:class:`~vllm_factory.testing.gliner.references.GLiNERRelexReference`), served from gliner's
own directory with ``--config-format gliner`` (no prep step).

Per relation case of the reference (thresholds, decoding mode): one request with every corpus
text, each text's entities and relations compared with gliner's for that text. Scores within
the serving dtype's tolerance; lists identical, except where a value that decides them lies
within the tolerance's margin of its threshold (a span score, or the adjacency or relation
score of a pair gliner's model kept, as the reference recorded them), which is counted and
reported (in fp32, at least 90 % of each case's texts identical). Also: entity-only requests on a relex checkpoint (its prompt lists no
relation) against gliner's span scores, and what a relation request is refused for (a 400
naming the field).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.testing.gliner.parity import _library_run, _limits, scores_of
from vllm_factory.testing.parity import library_factor
from vllm_factory.testing.report import record

__all__ = [
    "relex_cases",
    "server",
    "test_relex_entity_only_scores_match_gliner",
    "test_relex_matches_gliner_predict_relations",
    "test_relex_refusals_name_the_field",
]


@pytest.fixture(scope="session")
def server(reference_dir: Path):
    """One real vLLM server on gliner's own relex directory (``--config-format gliner``)."""
    from vllm_factory.testing.server import VllmServer  # httpx: integration tests only

    checkpoint = reference_dir / "checkpoint"
    assert not (checkpoint / "config.json").exists()  # gliner's layout, untouched
    with VllmServer(checkpoint, extra_args=["--config-format", "gliner"]) as running:
        print(f"\nvLLM server (relex, --config-format gliner) healthy after "
              f"{running.startup_seconds:.1f} s")  # fmt: skip
        yield running


@pytest.fixture(scope="session")
def relex_cases(reference_dir: Path) -> dict:
    return json.loads((reference_dir / "ref-entities.json").read_text(encoding="utf-8"))


def _entity_key(entity: dict) -> tuple:
    return entity["start"], entity["end"], entity["text"], entity["label"]


def _relation_key(relation: dict) -> tuple:
    return (
        tuple(relation["head"][k] for k in ("start", "end", "text", "type", "entity_idx")),
        relation["relation"],
        tuple(relation["tail"][k] for k in ("start", "end", "text", "type", "entity_idx")),
    )


def _near(values, threshold: float, margin: float) -> bool:
    values = np.asarray(values, dtype=np.float64)
    return bool(values.size and (np.abs(values - threshold) < margin).any())


def _compare(served: dict, expected: dict, args: dict, limits) -> str:
    """``"same"`` or ``"near"`` (lists differ where a deciding score lies within the margin of
    its threshold) for one text; asserts everything else."""
    threshold = args["threshold"]
    relation_threshold = args.get("relation_threshold", threshold)
    scores = np.asarray(served["scores"], dtype=np.float64)  # [words, max_width, labels]
    near_spans = False
    if scores.size:
        words, widths = scores.shape[:2]
        valid = (np.arange(words)[:, None] + np.arange(widths)[None, :]) < words
        near_spans = _near(scores[valid], threshold, limits.margin)
    got_entities = [_entity_key(e) for e in served["entities"]]
    want_entities = [_entity_key(e) for e in expected["entities"]]
    if got_entities != want_entities:
        assert near_spans, ("entities", args, served["entities"], expected["entities"])
        return "near"
    for got, want in zip(served["entities"], expected["entities"]):
        assert abs(got["score"] - want["score"]) <= limits.score, (got, want)
    got_relations = [_relation_key(r) for r in served["relations"]]
    want_relations = [_relation_key(r) for r in expected["relations"]]
    if got_relations != want_relations:
        gaps = [g for g in expected["closest"].values() if g is not None]
        near = near_spans or any(gap < limits.margin for gap in gaps)
        near = near or _near([r["score"] for r in expected["relations"]], relation_threshold,
                             limits.margin)  # fmt: skip
        assert near, (
            "relations", args, expected["closest"], sorted(set(got_relations) ^ set(want_relations))[:5]
        )  # fmt: skip
        return "near"
    for got, want in zip(served["relations"], expected["relations"]):
        assert abs(got["score"] - want["score"]) <= limits.score, (got, want)
    return "same"


def library_relation_drift(reference_dir: Path, cases: dict) -> float:
    """The largest |bf16 - fp32| of a relation score in gliner's own runs of the cases (the
    relations both runs keep alike)."""
    path = reference_dir / "ref-relex-bf16.json"
    assert path.exists(), f"no gliner bf16 relation run in {reference_dir}"
    bf16, worst = json.loads(path.read_text(encoding="utf-8"))["cases"], 0.0
    for name, case in cases.items():
        for own, ref in zip(bf16[name]["results"], case["results"]):
            same = [_relation_key(r) for r in own["relations"]] == [
                _relation_key(r) for r in ref["relations"]
            ]
            for a, b in zip(own["relations"], ref["relations"]) if same else ():
                worst = max(worst, abs(a["score"] - b["score"]))
    return worst


@pytest.mark.parity
def test_relex_matches_gliner_predict_relations(
    server, ner, corpus, relex_cases, reference_scores, reference_dir: Path
):
    limits = _limits(server, _library_run(server, reference_dir, reference_scores))
    if server.dtype != "float32":  # relation scores: gliner's own bf16 drift of them too
        drift = library_factor() * library_relation_drift(reference_dir, relex_cases["cases"])
        limits = dataclasses.replace(
            limits, score=max(limits.score, drift), margin=max(limits.margin, drift)
        )
    texts, cases = corpus["texts"], relex_cases["cases"]
    summary, worst = {}, 0.0
    for name, case in cases.items():
        args = case["arguments"]
        items = ner({"text": texts, "labels": relex_cases["labels"],
                     "relations": relex_cases["relations"], "return_scores": True, **args})  # fmt: skip
        assert len(items) == len(texts)
        statuses = []
        for item, expected in zip(items, case["results"]):
            statuses.append(_compare(item, expected, args, limits))
            if statuses[-1] == "same":
                for got, want in zip(item["relations"], expected["relations"]):
                    worst = max(worst, abs(got["score"] - want["score"]))
        same = statuses.count("same")
        summary[name] = {"texts": len(texts), "same": same,
                         "relations": sum(len(r["relations"]) for r in case["results"])}  # fmt: skip
        if server.dtype == "float32":  # a near tie is rare at fp32: most lists are identical
            assert same >= 0.9 * len(texts), (name, statuses)
    record(server.label.removesuffix("_io"), "parity", "relex", {
        "dtype": server.dtype, "cases": summary, "max_abs_diff_relation_score": worst,
        "threshold": limits.score,
    })  # fmt: skip
    print(f"\nrelex parity ({server.dtype}): max |relation score diff| {worst:.2e}; {summary}")
    assert sum(s["relations"] for s in summary.values()) > 0


@pytest.mark.parity
def test_relex_entity_only_scores_match_gliner(
    ner, corpus, reference_scores, server, reference_dir: Path
):
    """A relex checkpoint without data.relations: gliner's relex prompt (no relation labels),
    its span scores."""
    served = scores_of(ner, corpus)
    limits = _limits(server, _library_run(server, reference_dir, reference_scores))
    worst = 0.0
    for name in corpus["label_sets"]:
        for i in range(len(corpus["texts"])):
            ref = reference_scores[f"scores_{name}_{i}"]
            got = served[name][i]
            assert got.shape == ref.shape, (name, i, got.shape, ref.shape)
            worst = max(worst, float(np.abs(got - ref).max()) if ref.size else 0.0)
    print(f"\nrelex checkpoint, entity-only requests: max |score diff| {worst:.2e}")
    assert worst <= limits.score


def test_relex_refusals_name_the_field(server, corpus):
    text = corpus["texts"][3]
    base = {"text": text, "labels": ["person"], "relations": ["works for"]}
    long_text = " ".join(["word"] * 100)
    cases = [
        ({**base, "long_text": "window"}, "data.long_text"),
        ({"text": text, "labels": ["person"], "relation_threshold": 0.5},
         "data.relation_threshold"),
        ({**base, "relation_threshold": 1.5}, "data.relation_threshold"),
        ({**base, "adjacency_threshold": -0.1}, "data.adjacency_threshold"),
        ({**base, "relations": ["a <<REL>> b"]}, "data.relations"),
        ({**base, "relations": []}, "data.relations"),
        ({**base, "candidate_labels": ["Berlin"]}, "data.candidate_labels"),
        ({**base, "relations": [f"r{i}" for i in range(256)]}, "data.relations"),
        # every span of a 100-word window is a candidate at threshold 0: over the pairing limit
        ({**base, "text": long_text, "max_len": 100, "threshold": 0.0}, "data.threshold"),
        # entity pairs x relation labels over the cell budget, refused before the model runs
        ({**base, "text": [long_text] * 4, "relations": [f"r{i}" for i in range(200)]},
         "data.relations"),
    ]  # fmt: skip
    for body, field in cases:
        response = server.pooling(body)
        assert response.status_code == 400, (field, response.status_code, response.text[:300])
        assert field in response.text, (field, response.text[:300])
    response = server.pooling({**base, "text": [text, text]})
    assert response.status_code == 200, response.text
    one, two = response.json()["data"]
    assert one == two and set(one) == {"entities", "relations"}
