"""Served token scores and entities vs gliner's token-level model (``span_mode: token_level``)
on the same tiny checkpoint (:class:`~vllm_factory.testing.gliner.references.GLiNERTokenReference`).

As :mod:`~vllm_factory.testing.gliner.parity` for span models, with the token model's score
tensor ``[words, labels, 3]`` (start / end / inside): the same tolerances per serving dtype
(gliner's own bf16 run as the yardstick below fp32), a thresholded decision compared only
where no score lies within the margin of the threshold or every served score falls on the same
side, and differing lists excused only where two overlapping candidates score within the tie
gap (not equal: equal scores come from the same score cell, so both sides rank them alike).
Also: what token-level checkpoints refuse (``class_probs``, linking) and long texts in windows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.heads.gliner.token_level import token_candidates
from vllm_factory.testing.gliner.parity import (
    AS_GLINER,
    MODES,
    _library_run,
    _limits,
    only_near_threshold,
    scores_of,
)
from vllm_factory.testing.parity import Tolerance, library_factor
from vllm_factory.testing.report import record

__all__ = [
    "served_scores",
    "test_token_entities_match_gliner",
    "test_token_input_spans_match_gliner",
    "test_token_level_long_text_in_windows",
    "test_token_level_refuses_span_only_options",
    "test_token_scores_match_gliner",
]


@pytest.fixture(scope="module")
def served_scores(ner, corpus) -> dict[str, list[np.ndarray]]:
    return scores_of(ner, corpus)


@pytest.mark.parity
def test_token_scores_match_gliner(
    served_scores, reference_scores, corpus, server, reference_dir: Path
):
    library = _library_run(server, reference_dir, reference_scores)
    limits, worst, spread = _limits(server, library), 0.0, []
    for name, labels in corpus["label_sets"].items():
        for i, text in enumerate(corpus["texts"]):
            ref = reference_scores[f"scores_{name}_{i}"]
            got = served_scores[name][i]
            n = int(reference_scores[f"words_{name}_{i}"])
            assert ref.shape == (n, len(labels), 3)
            assert got.shape == ref.shape, (name, i, text[:40], got.shape, ref.shape)
            diff = float(np.abs(got - ref).max()) if ref.size else 0.0
            worst = max(worst, diff)
            assert diff <= limits.score, (name, i, text[:40], diff)
            spread.append(ref.reshape(-1, 3))
    values = np.concatenate(spread)
    fractions = {t: (values > t).mean(0).round(3).tolist() for t in corpus["thresholds"]}
    own = library["max_abs_diff"] if library else None
    record(server.label.removesuffix("_io"), "parity", "token_level/scores", {
        "dtype": server.dtype, "scores": int(values.size), "max_abs_diff": worst,
        "threshold": limits.score, "library_bf16_max_abs_diff": own,
    })  # fmt: skip
    print(
        f"\ntoken score parity ({server.dtype}): {values.size} start/end/inside scores, "
        f"max |diff| {worst:.2e}" + (f" (gliner's own bf16 run: {own:.2e})" if own else "")
        + f"; fraction above each threshold (start, end, inside): {fractions}"
    )  # fmt: skip
    for threshold, per_kind in fractions.items():
        assert all(0.02 < f < 0.98 for f in per_kind), f"threshold {threshold}: {per_kind}"


def _near_threshold(scores: np.ndarray, threshold: float, margin: float) -> bool:
    return bool((np.abs(scores - threshold) < margin).any())


def _same_side(served: np.ndarray, ref: np.ndarray, threshold: float) -> bool:
    """Every start / end decision (above) and inside decision (not below) alike."""
    strict = ((served[..., :2] > threshold) == (ref[..., :2] > threshold)).all()
    inside = ((served[..., 2] >= threshold) == (ref[..., 2] >= threshold)).all()
    return bool(strict and inside)


def _near_tie(scores: np.ndarray, threshold: float, limits: Tolerance, allowed=None) -> bool:
    """Two overlapping candidate spans (any labels) whose scores differ by at most
    ``limits.tie`` but are not equal (the threshold lowered by the margin, so candidates
    near it count)."""
    spans = token_candidates(scores, threshold - limits.margin, allowed)
    order = np.argsort(spans.score, kind="stable")
    start, end, score = spans.start[order], spans.end[order], spans.score[order]
    for a in range(len(score)):
        b = a + 1
        while b < len(score) and score[b] - score[a] <= limits.tie:
            overlap = start[a] <= end[b] and start[b] <= end[a]
            if overlap and score[b] != score[a]:
                return True
            b += 1
    return False


def _key(entities: list[dict]) -> list[tuple]:
    return [(e["text"], e["label"], e["start"], e["end"]) for e in entities]


def _compare(served, expected, scores, served_cells, text, threshold, limits, allowed=None):
    """``"near"`` / ``"skipped"`` / ``"tie"`` / ``"same"`` for one text's lists (asserting
    equality where nothing explains a difference)."""
    status = "same"
    if _near_threshold(scores, threshold, limits.margin):
        if not _same_side(served_cells, scores, threshold):
            return "skipped"
        status = "near"
    if _key(served) != _key(expected) and _near_tie(scores, threshold, limits, allowed):
        return "tie"
    if _key(served) != _key(expected) and only_near_threshold(
        served, expected, threshold, limits.margin
    ):
        return "skipped"
    assert _key(served) == _key(expected), (threshold, text[:40], served, expected)
    for got, ref in zip(served, expected):
        assert abs(got["score"] - ref["score"]) <= limits.score, (got, ref)
        assert got["text"] == text[got["start"] : got["end"]]
        assert "class_probs" not in got
    return status


@pytest.mark.parity
@pytest.mark.parametrize("mode", sorted(MODES))
def test_token_entities_match_gliner(
    mode, ner, served_scores, reference_dir: Path, reference_scores, corpus, server
):
    library = _library_run(server, reference_dir, reference_scores)
    limits = _limits(server, library)
    reference = json.loads((reference_dir / "ref-entities.json").read_text(encoding="utf-8"))
    counts = {"same": 0, "near": 0, "skipped": 0, "tie": 0}
    entities = long_spans = 0
    max_width = _max_width(reference_dir)
    for name, labels in corpus["label_sets"].items():
        for threshold in corpus["thresholds"]:
            data = {"text": corpus["texts"], "labels": labels, "threshold": threshold,
                    **AS_GLINER, **MODES[mode]}  # fmt: skip
            served = ner(data)
            expected = reference[f"{name}/{mode}/{threshold}"]
            for i, text in enumerate(corpus["texts"]):
                scores = reference_scores[f"scores_{name}_{i}"]
                status = _compare(served[i], expected[i], scores, served_scores[name][i],
                                  text, threshold, limits)  # fmt: skip
                counts[status] += 1
                if status in ("same", "near"):
                    entities += len(expected[i])
                    long_spans += sum(len(e["text"].split()) > max_width for e in expected[i])
    compared = counts["same"] + counts["near"]
    record(server.label.removesuffix("_io"), "parity", f"token_level/entities/{mode}", {
        "dtype": server.dtype, "identical": compared, "entities": entities,
        "wider_than_max_width": long_spans, **counts,
    })  # fmt: skip
    print(
        f"\ntoken-level {mode} ({server.dtype}): {compared} entity lists identical ({entities} "
        f"entities, {long_spans} wider than max_width; {counts['near']} with a score within "
        f"{limits.margin} of the threshold, same side), {counts['skipped']} skipped, "
        f"{counts['tie']} near-ties"
    )
    total = sum(counts.values())
    assert entities > 0
    if library is None:
        assert compared >= 0.9 * total
        assert counts["tie"] <= 0.05 * (compared + counts["tie"])
    else:
        own = _own_flips(library, reference_scores, corpus)
        assert counts["skipped"] <= max(0.1 * total, library_factor() * own), (counts, own)


def _own_flips(library: dict, reference_scores, corpus) -> int:
    return sum(
        not _same_side(
            library["scores"][f"scores_{name}_{i}"],
            reference_scores[f"scores_{name}_{i}"],
            threshold,
        )
        for name in corpus["label_sets"]
        for i in range(len(corpus["texts"]))
        for threshold in corpus["thresholds"]
    )


def _max_width(reference_dir: Path) -> int:
    config = json.loads((reference_dir / "checkpoint" / "gliner_config.json").read_text())
    return int(config["max_width"])


@pytest.mark.parity
def test_token_input_spans_match_gliner(
    ner, served_scores, reference_dir: Path, reference_scores, corpus, server
):
    """Entities restricted to given character spans (misaligned ones dropped, an empty list
    keeping nothing), as gliner's token decoder restricts them."""
    from vllm_factory.heads.gliner.decoding import word_spans
    from vllm_factory.heads.gliner.prompts import split_words

    library = _library_run(server, reference_dir, reference_scores)
    limits = _limits(server, library)
    reference = json.loads((reference_dir / "ref-entities.json").read_text(encoding="utf-8"))
    spans = reference["input_spans"]
    counts = {"same": 0, "near": 0, "skipped": 0, "tie": 0}
    entities = restricted = 0
    for name, labels in corpus["label_sets"].items():
        for threshold in corpus["thresholds"]:
            served = ner({"text": corpus["texts"], "labels": labels, "threshold": threshold,
                          "input_spans": spans, **AS_GLINER})  # fmt: skip
            expected = reference[f"{name}/input_spans/{threshold}"]
            for i, text in enumerate(corpus["texts"]):
                scores = reference_scores[f"scores_{name}_{i}"]
                chars = [(s["start"], s["end"]) for s in spans[i]]
                allowed = set(word_spans(chars, split_words(text)))
                status = _compare(served[i], expected[i], scores, served_scores[name][i],
                                  text, threshold, limits, allowed)  # fmt: skip
                counts[status] += 1
                chosen = {(s["start"], s["end"]) for s in spans[i]}
                assert all((e["start"], e["end"]) in chosen for e in served[i])
                if status in ("same", "near"):
                    entities += len(expected[i])
                    restricted += len(spans[i]) > 0
    compared = counts["same"] + counts["near"]
    record(server.label.removesuffix("_io"), "parity", "token_level/entities/input_spans", {
        "dtype": server.dtype, "identical": compared, "entities": entities, **counts,
    })  # fmt: skip
    print(f"\ntoken-level input_spans ({server.dtype}): {compared} entity lists identical "
          f"({entities} entities), {counts}")  # fmt: skip
    assert entities > 0 and restricted > 0
    total = sum(counts.values())
    if library is None:
        assert compared >= 0.9 * total


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"return_class_probs": True}, "data.return_class_probs"),
        ({"candidate_labels": ["Paris", "London"]}, "data.candidate_labels"),
    ],
)
def test_token_level_refuses_span_only_options(server, corpus, extra, field):
    """What needs a span's per-label scores is a 400 naming the field, never a silent drop."""
    data = {"text": corpus["texts"][0], "labels": ["person", "location"], **extra}
    response = server.pooling(data)
    assert response.status_code == 400, response.text
    assert field in response.text


def test_token_level_long_text_in_windows(ner, reference_dir: Path, corpus):
    """A text longer than max_len words is read whole: one score row per word, entities with
    offsets into the whole text (spans may cross a window border); the words only the first
    window reads score as the text cut at max_len does."""
    max_len = int(
        json.loads((reference_dir / "checkpoint" / "gliner_config.json").read_text())["max_len"]
    )
    text = " ".join(corpus["texts"])
    labels = corpus["label_sets"]["5"]
    words = len(text.split())
    assert words > 2 * max_len
    whole = ner({"text": text, "labels": labels, "threshold": 0.3, "long_text": "window",
                 "return_scores": True, "return_windows": True})  # fmt: skip
    cut = ner({"text": text, "labels": labels, "threshold": 0.3, "long_text": "truncate",
               "return_scores": True})  # fmt: skip
    scores, first = np.asarray(whole["scores"]), np.asarray(cut["scores"])
    assert whole["windows"] > 2 and scores.shape[1:] == (len(labels), 3)
    assert scores.shape[0] > max_len and first.shape[0] == max_len
    alone = max_len - max_len // 4  # the default overlap: a quarter of max_len
    np.testing.assert_allclose(scores[:alone], first[:alone], rtol=0, atol=1e-4)
    assert whole["entities"]
    for entity in whole["entities"]:
        assert entity["text"] == text[entity["start"] : entity["end"]]
    assert max(e["end"] for e in whole["entities"]) > len(" ".join(text.split()[:max_len]))
