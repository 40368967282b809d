"""Served scores and entities vs the gliner library on the same tiny checkpoint.

How close is close enough depends on the server's dtype (the reference is gliner in fp32 on
the CPU; see ``vllm_factory.testing.parity``): the largest score difference, the margin
around a threshold inside which a score may land on either side, and the gap under which two
overlapping candidate spans may be ranked either way. Below fp32 these follow gliner's own run
in that dtype (``ref-scores-bf16.npz``), and the served scores may flip a thresholded decision
in at most ``library_factor()`` times as many texts as gliner's own bf16 run does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.testing.parity import LibraryError, Tolerance, library_factor, tolerance
from vllm_factory.testing.report import record

# What a package's test module collects (``from ... import *``).
__all__ = [
    "served_scores",
    "test_entities_match_gliner",
    "test_input_spans_and_class_probs_match_gliner",
    "test_score_tensors_match_gliner",
]

# gliner reads a text's first max_len words: the corpus's longer texts are compared cut as well
# (read whole in windows, they are compared in :mod:`~vllm_factory.testing.gliner.long_text`).
AS_GLINER = {"long_text": "truncate"}

MODES = {
    "flat": {"flat_ner": True, "multi_label": False},
    "nested": {"flat_ner": False, "multi_label": False},
    "multi_label": {"flat_ner": True, "multi_label": True},
}


def scores_of(ner, corpus: dict) -> dict[str, list[np.ndarray]]:
    """Every corpus text per label set, in one request per label set (batched); ``ner(data)``
    returns a response's ``data`` list."""
    out = {}
    for name, labels in corpus["label_sets"].items():
        items = ner({"text": corpus["texts"], "labels": labels, "return_scores": True,
                     **AS_GLINER})  # fmt: skip
        out[name] = [np.asarray(item["scores"], dtype=np.float32) for item in items]
    return out


@pytest.fixture(scope="module")
def served_scores(ner, corpus) -> dict[str, list[np.ndarray]]:
    return scores_of(ner, corpus)


def largest_score_difference(served, reference_scores, corpus) -> float:
    """max |served - gliner| over every span x label score of the corpus (shapes must match)."""
    worst = 0.0
    for name in corpus["label_sets"]:
        for i, text in enumerate(corpus["texts"]):
            ref = reference_scores[f"scores_{name}_{i}"]
            got = served[name][i]
            assert got.shape == ref.shape, (name, i, text[:40], got.shape, ref.shape)
            worst = max(worst, float(np.abs(got - ref).max()))
    return worst


def _valid(scores: np.ndarray, n_words: int) -> np.ndarray:
    """Cells of spans that end inside the text."""
    return np.arange(scores.shape[0])[:, None] + np.arange(scores.shape[1])[None, :] < n_words


def _library_run(
    server, reference_dir: Path, reference_scores, path: Path | None = None
) -> dict | None:
    """gliner's own scores in the server's dtype (None in fp32), and the largest distance of
    them from gliner's fp32 scores. ``path``: that run's file (default the reference's,
    ``ref-scores-bf16.npz``; the LoRA suite's: gliner's bf16 run with an adapter)."""
    if server.dtype == "float32":
        return None
    path = path or reference_dir / "ref-scores-bf16.npz"
    assert path.exists(), f"no gliner {server.dtype} run in {reference_dir}"
    data = np.load(path)
    own = {key: data[key] for key in data.files if key.startswith("scores_")}
    worst = max(float(np.abs(scores - reference_scores[key]).max()) for key, scores in own.items())
    return {"scores": own, "max_abs_diff": worst}


def _limits(server, library: dict | None) -> Tolerance:
    error = library and LibraryError(max_abs_diff=library["max_abs_diff"])
    return tolerance(server.dtype, error)


@pytest.mark.parity
def test_score_tensors_match_gliner(
    served_scores, reference_scores, corpus, server, reference_dir: Path
):
    library = _library_run(server, reference_dir, reference_scores)
    limits, worst, worst_case, spread = _limits(server, library), 0.0, None, []
    for name in corpus["label_sets"]:
        for i, text in enumerate(corpus["texts"]):
            ref = reference_scores[f"scores_{name}_{i}"]
            got = served_scores[name][i]
            assert got.shape == ref.shape, (name, i, text[:40], got.shape, ref.shape)
            diff = float(np.abs(got - ref).max())
            if diff > worst:
                worst, worst_case = diff, (name, i, text[:40])
            n = int(reference_scores[f"words_{name}_{i}"])
            spread.append(ref[_valid(ref, n)].ravel())
    values = np.concatenate(spread)
    quantiles = np.quantile(values, [0.01, 0.1, 0.5, 0.9, 0.99])
    fractions = {t: float((values > t).mean()) for t in corpus["thresholds"]}
    own = library["max_abs_diff"] if library else None
    record(server.label.removesuffix("_io"), "parity", "scores", {
        "dtype": server.dtype, "scores": len(values), "max_abs_diff": worst,
        "threshold": limits.score, "library_bf16_max_abs_diff": own,
    })  # fmt: skip
    print(
        f"\nscore parity ({server.dtype}): {len(values)} span x label scores, "
        f"max |diff| {worst:.2e}"
        + (f" (gliner's own bf16 run: {own:.2e}); " if own else "; ")
        + f"reference quantiles 1/10/50/90/99%: {np.round(quantiles, 3).tolist()}; "
        f"fraction above threshold: {fractions}"
    )
    # Asserted once recorded, so that a run past the bound still reports its figures.
    assert worst <= limits.score, (worst_case, worst, limits.score)
    for threshold, fraction in fractions.items():
        assert 0.02 < fraction < 0.98, f"threshold {threshold} keeps {fraction:.1%}"


def _case(reference_scores, library: dict | None, name: str, i: int, threshold: float):
    """gliner's scores and word count for text ``i`` with label set ``name``, and whether
    gliner's own run in the server's dtype (if any) puts a decision on the other side of
    ``threshold``."""
    scores = reference_scores[f"scores_{name}_{i}"]
    n_words = int(reference_scores[f"words_{name}_{i}"])
    own = library and library["scores"][f"scores_{name}_{i}"]
    return scores, n_words, own is not None and not _same_side(own, scores, n_words, threshold)


def _near_threshold(scores: np.ndarray, n_words: int, threshold: float, margin: float) -> bool:
    return bool((np.abs(scores[_valid(scores, n_words)] - threshold) < margin).any())


def _key(entities: list[dict]) -> list[tuple]:
    return [(e["text"], e["label"], e["start"], e["end"]) for e in entities]


def _near_tie(scores: np.ndarray, n_words: int, threshold: float, limits: Tolerance) -> bool:
    """Greedy decoding keeps the best of overlapping spans, and one choice changes what else
    fits. Where two overlapping candidates (any labels) score within ``limits.tie`` of each
    other, float noise may order them either way (1e-7 apart was seen in fp32), so the lists
    may differ."""
    starts = np.arange(scores.shape[0])[:, None, None]
    widths = np.arange(scores.shape[1])[None, :, None]
    keep = (starts + widths < n_words) & (scores > threshold - limits.margin)
    cells = np.argwhere(keep)
    values = scores[keep]  # same (row-major) order as cells
    order = np.argsort(values, kind="stable")
    values, cells = values[order], cells[order]
    for a in range(len(values)):
        b = a + 1
        while b < len(values) and values[b] - values[a] <= limits.tie:
            (sa, wa, _), (sb, wb, _) = cells[a], cells[b]
            if sa <= sb + wb and sb <= sa + wa:  # word spans [s, s + w] overlap
                return True
            b += 1
    return False


def only_near_threshold(got: list[dict], want: list[dict], threshold: float, margin: float) -> bool:
    """The entity lists differ only in entities whose own score lies within ``margin`` of the
    threshold in the list that holds them (a span's score can cross the threshold while its
    cells keep their side, and two runs of one server batch prompts differently)."""
    got_keys = {(e["start"], e["end"], e["label"]) for e in got}
    want_keys = {(e["start"], e["end"], e["label"]) for e in want}
    differ = [e for e in got if (e["start"], e["end"], e["label"]) not in want_keys]
    differ += [e for e in want if (e["start"], e["end"], e["label"]) not in got_keys]
    return bool(differ) and all(abs(e["score"] - threshold) < margin for e in differ)


def _same_side(served: np.ndarray, ref: np.ndarray, n_words: int, threshold: float) -> bool:
    valid = _valid(ref, n_words)
    return bool(((served[valid] > threshold) == (ref[valid] > threshold)).all())


@pytest.mark.parity
@pytest.mark.parametrize("mode", sorted(MODES))
def test_entities_match_gliner(
    mode, ner, served_scores, reference_dir: Path, reference_scores, corpus, server
):
    """Identical entity lists wherever no score is within the margin of the threshold; where one
    is, still compared when every served score falls on the same side of the threshold as
    gliner's (then only a flipped cell could explain a difference)."""
    library = _library_run(server, reference_dir, reference_scores)
    limits = _limits(server, library)
    reference = json.loads((reference_dir / "ref-entities.json").read_text(encoding="utf-8"))
    compared = near = skipped = entities = ties = own_flips = 0
    differing, worst = [], 0.0  # lists that differ unexplained; largest entity score difference
    for name, labels in corpus["label_sets"].items():
        for threshold in corpus["thresholds"]:
            data = {"text": corpus["texts"], "labels": labels, "threshold": threshold,
                    **AS_GLINER}  # fmt: skip
            served = ner({**data, **MODES[mode]})
            expected = reference[f"{name}/{mode}/{threshold}"]
            for i, text in enumerate(corpus["texts"]):
                scores, n_words, own_flip = _case(reference_scores, library, name, i, threshold)
                own_flips += own_flip
                if _near_threshold(scores, n_words, threshold, limits.margin):
                    if not _same_side(served_scores[name][i], scores, n_words, threshold):
                        skipped += 1
                        continue
                    near += 1
                differs = _key(served[i]) != _key(expected[i])
                if differs and _near_tie(scores, n_words, threshold, limits):
                    ties += 1
                    continue
                if differs:
                    differing.append((name, threshold, i, text[:40]))
                    continue
                for got, ref in zip(served[i], expected[i]):
                    worst = max(worst, abs(got["score"] - ref["score"]))
                    assert got["text"] == text[got["start"] : got["end"]]
                compared += 1
                entities += len(expected[i])
    record(server.label.removesuffix("_io"), "parity", f"entities/{mode}", {
        "dtype": server.dtype, "identical": compared, "entities": entities,
        "near_threshold_same_side": near, "skipped_flipped": skipped, "near_ties": ties,
        "differing": len(differing), "max_entity_score_diff": worst,
        "margin": limits.margin, "tie": limits.tie,
        "library_bf16_flips": own_flips if library else None,
    })  # fmt: skip
    print(
        f"\n{mode} ({server.dtype}): {compared} entity lists identical ({entities} entities; "
        f"{near} of them with a score within {limits.margin} of the threshold, same side), "
        f"{skipped} skipped, {ties} differing where overlapping candidate spans score within "
        f"{limits.tie} of each other"
        + (f"; gliner's own {server.dtype} run flips a decision in {own_flips}" if library else "")
    )
    # Asserted once recorded, so that a run past a bound still reports its figures.
    assert not differing, (len(differing), differing[:5])
    assert worst <= limits.score, (worst, limits.score)
    total = compared + skipped + ties
    if library is None:
        assert compared >= 0.9 * total
        assert ties <= 0.05 * (compared + ties)
    else:  # every difference is explained above; flips no more often than gliner's own
        assert skipped <= max(0.1 * total, library_factor() * own_flips), (skipped, own_flips)


def _class_probs_match(got: dict, reference: dict[str, float], limit: float) -> bool:
    """``got`` (served ``class_probs``) holds gliner's top-k labels of the span cell whose full
    label -> score map is ``reference``: each value within ``limit`` of gliner's for that
    label, and no label left out that gliner scores more than ``limit`` above one kept (so
    ranks within float noise of each other may swap, as bf16 makes them)."""
    k = min(len(reference), 5)
    if len(got) != k or any(label not in reference for label in got):
        return False
    kth = sorted(reference.values(), reverse=True)[k - 1]
    return all(
        abs(value - reference[label]) <= limit and reference[label] >= kth - limit
        for label, value in got.items()
    )


@pytest.mark.parity
def test_input_spans_and_class_probs_match_gliner(
    ner, served_scores, reference_dir: Path, reference_scores, corpus, server
):
    """What glinker's L3 / L4 components ask gliner for: entities restricted to given character
    spans (misaligned ones dropped, an empty list keeping nothing), with ``class_probs``."""
    library = _library_run(server, reference_dir, reference_scores)
    limits = _limits(server, library)
    reference = json.loads((reference_dir / "ref-entities.json").read_text(encoding="utf-8"))
    spans = reference["input_spans"]
    compared = flipped = ties = entities = restricted = own_flips = 0
    for name, labels in corpus["label_sets"].items():
        for threshold in corpus["thresholds"]:
            served = ner({
                "text": corpus["texts"], "labels": labels, "threshold": threshold,
                "input_spans": spans, "return_class_probs": True, **AS_GLINER,
            })  # fmt: skip
            expected = reference[f"{name}/input_spans/{threshold}"]
            for i, text in enumerate(corpus["texts"]):
                scores, n_words, own_flip = _case(reference_scores, library, name, i, threshold)
                own_flips += own_flip
                if _near_threshold(scores, n_words, threshold, limits.margin) and not _same_side(
                    served_scores[name][i], scores, n_words, threshold
                ):
                    flipped += 1
                    continue
                got, ref = served[i], expected[i]
                if _key(got) != _key(ref) and _near_tie(scores, n_words, threshold, limits):
                    ties += 1
                    continue
                assert _key(got) == _key(ref), (name, threshold, i, text[:40])
                allowed = {(s["start"], s["end"]) for s in spans[i]}
                for g, r in zip(got, ref):
                    assert (g["start"], g["end"]) in allowed
                    assert abs(g["score"] - r["score"]) <= limits.score
                    cell = dict(zip(labels, _cell(scores, text, g).tolist()))
                    assert _class_probs_match(g["class_probs"], cell, limits.score), (
                        name, threshold, i, g["class_probs"], r["class_probs"],
                    )  # fmt: skip
                compared += 1
                entities += len(ref)
                restricted += len(spans[i]) > 0
    record(server.label.removesuffix("_io"), "parity", "entities/input_spans", {
        "dtype": server.dtype, "identical": compared, "entities": entities,
        "skipped_flipped": flipped, "near_ties": ties,
        "library_bf16_flips": own_flips if library else None,
    })  # fmt: skip
    print(
        f"\ninput_spans + class_probs ({server.dtype}): {compared} entity lists identical "
        f"({entities} entities, class_probs within {limits.score}), {flipped} skipped (a "
        f"score on the other side of the threshold), {ties} near-ties"
    )
    assert entities > 0 and restricted > 0
    total = compared + flipped + ties
    if library is None:
        assert compared >= 0.9 * total
    else:  # as the unrestricted lists: no more flips than gliner's own run explains
        assert flipped <= max(0.1 * total, library_factor() * own_flips), (flipped, own_flips)


def _cell(scores: np.ndarray, text: str, entity: dict) -> np.ndarray:
    """The label scores of an entity's span cell in ``scores`` (found by its character
    offsets)."""
    from vllm_factory.heads.gliner.prompts import split_words

    words = split_words(text)
    first = next(i for i, w in enumerate(words) if w.start == entity["start"])
    last = next(i for i, w in enumerate(words) if w.end == entity["end"])
    return scores[first, last - first]
