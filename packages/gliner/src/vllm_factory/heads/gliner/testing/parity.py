"""Served scores and entities vs the gliner library on the same tiny checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

SCORE_TOL = 1e-4
MARGIN = 1e-3  # thresholds this close to some score are skipped (float noise may flip them)
TIE = 2e-5  # overlapping spans this close (2x the worst score noise) may be kept either way
MODES = {
    "flat": {"flat_ner": True, "multi_label": False},
    "nested": {"flat_ner": False, "multi_label": False},
    "multi_label": {"flat_ner": True, "multi_label": True},
}


@pytest.fixture(scope="module")
def served_scores(ner, corpus) -> dict[str, list[np.ndarray]]:
    """Every corpus text per label set, in one request per label set (batched)."""
    out = {}
    for name, labels in corpus["label_sets"].items():
        items = ner({"text": corpus["texts"], "labels": labels, "return_scores": True})
        out[name] = [np.asarray(item["scores"], dtype=np.float32) for item in items]
    return out


@pytest.mark.parity
def test_score_tensors_match_gliner(served_scores, reference_scores, corpus):
    worst, spread = 0.0, []
    for name in corpus["label_sets"]:
        for i, text in enumerate(corpus["texts"]):
            ref = reference_scores[f"scores_{name}_{i}"]
            got = served_scores[name][i]
            assert got.shape == ref.shape, (name, i, text[:40], got.shape, ref.shape)
            diff = float(np.abs(got - ref).max())
            worst = max(worst, diff)
            assert diff <= SCORE_TOL, (name, i, text[:40], diff)
            n = int(reference_scores[f"words_{name}_{i}"])
            valid = np.arange(ref.shape[0])[:, None] + np.arange(ref.shape[1])[None, :] < n
            spread.append(ref[valid].ravel())
    values = np.concatenate(spread)
    quantiles = np.quantile(values, [0.01, 0.1, 0.5, 0.9, 0.99])
    fractions = {t: float((values > t).mean()) for t in corpus["thresholds"]}
    print(
        f"\nscore parity: {len(values)} span x label scores, max |diff| {worst:.2e}; "
        f"reference quantiles 1/10/50/90/99%: {np.round(quantiles, 3).tolist()}; "
        f"fraction above threshold: {fractions}"
    )
    for threshold, fraction in fractions.items():
        assert 0.02 < fraction < 0.98, f"threshold {threshold} keeps {fraction:.1%}"


def _near_threshold(scores: np.ndarray, n_words: int, threshold: float) -> bool:
    valid = np.arange(scores.shape[0])[:, None] + np.arange(scores.shape[1])[None, :] < n_words
    return bool((np.abs(scores[valid] - threshold) < MARGIN).any())


def _key(entities: list[dict]) -> list[tuple]:
    return [(e["text"], e["label"], e["start"], e["end"]) for e in entities]


def _near_tie(scores: np.ndarray, n_words: int, threshold: float) -> bool:
    """Greedy decoding keeps the best of overlapping spans, and one choice changes what else
    fits. Where two overlapping candidates (any labels) score within TIE of each other, float
    noise may order them either way (1e-7 apart was seen), so the lists may differ."""
    starts = np.arange(scores.shape[0])[:, None, None]
    widths = np.arange(scores.shape[1])[None, :, None]
    keep = (starts + widths < n_words) & (scores > threshold - MARGIN)
    cells = np.argwhere(keep)
    values = scores[keep]  # same (row-major) order as cells
    order = np.argsort(values, kind="stable")
    values, cells = values[order], cells[order]
    for a in range(len(values)):
        b = a + 1
        while b < len(values) and values[b] - values[a] <= TIE:
            (sa, wa, _), (sb, wb, _) = cells[a], cells[b]
            if sa <= sb + wb and sb <= sa + wa:  # word spans [s, s + w] overlap
                return True
            b += 1
    return False


def _same_side(served: np.ndarray, ref: np.ndarray, n_words: int, threshold: float) -> bool:
    valid = np.arange(ref.shape[0])[:, None] + np.arange(ref.shape[1])[None, :] < n_words
    return bool(((served[valid] > threshold) == (ref[valid] > threshold)).all())


@pytest.mark.parity
@pytest.mark.parametrize("mode", sorted(MODES))
def test_entities_match_gliner(
    mode, ner, served_scores, reference_dir: Path, reference_scores, corpus
):
    """Identical entity lists wherever no score is within MARGIN of the threshold; where one
    is, still compared when every served score falls on the same side of the threshold as
    gliner's (then only a flipped cell could explain a difference)."""
    reference = json.loads((reference_dir / "ref-entities.json").read_text(encoding="utf-8"))
    compared = near = skipped = entities = ties = 0
    for name, labels in corpus["label_sets"].items():
        for threshold in corpus["thresholds"]:
            data = {"text": corpus["texts"], "labels": labels, "threshold": threshold}
            served = ner({**data, **MODES[mode]})
            expected = reference[f"{name}/{mode}/{threshold}"]
            for i, text in enumerate(corpus["texts"]):
                scores = reference_scores[f"scores_{name}_{i}"]
                n_words = int(reference_scores[f"words_{name}_{i}"])
                if _near_threshold(scores, n_words, threshold):
                    if not _same_side(served_scores[name][i], scores, n_words, threshold):
                        skipped += 1
                        continue
                    near += 1
                if _key(served[i]) != _key(expected[i]) and _near_tie(scores, n_words, threshold):
                    ties += 1
                    continue
                assert _key(served[i]) == _key(expected[i]), (name, threshold, i, text[:40])
                for got, ref in zip(served[i], expected[i]):
                    assert abs(got["score"] - ref["score"]) <= SCORE_TOL
                    assert got["text"] == text[got["start"] : got["end"]]
                compared += 1
                entities += len(expected[i])
    print(
        f"\n{mode}: {compared} entity lists identical ({entities} entities; {near} of them with "
        f"a score within {MARGIN} of the threshold, same side), {skipped} skipped, {ties} "
        f"differing where overlapping candidate spans score within {TIE} of each other"
    )
    assert compared >= 0.9 * (compared + skipped + ties)
    assert ties <= 0.05 * (compared + ties)
