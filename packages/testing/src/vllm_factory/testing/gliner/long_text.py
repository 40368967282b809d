"""Long texts read whole, in windows, vs gliner's model on the same windows (the GLiNER family's
``server`` and ``ner`` fixtures; a package's test module star-imports this module).

gliner has no long-text API: ``scripts/gliner_long_encode.py`` splits each text with gliner's
splitter into the served windows, scores each window with gliner's model and merges the candidates
by the served rule, written there on its own (windows end at ``max_len`` words or where a prompt's
tokens run out, whichever comes first). The texts: 1, 2.5 and 10 windows of the checkpoint's
``max_len`` words, unicode words and odd whitespace at every window border, token-dense texts (long
numbers, rare words) where windows of ``max_len`` words alone left words unread, with the
reference's check that every word gets a token in some window, spans across the borders (found, and
given as ``input_spans``), and a 10,000-word text (decoded at the threshold that keeps a trained
model's share of candidates). Scores are compared within the tolerances of
:mod:`vllm_factory.testing.parity` for the server's dtype (below fp32, widened by what that dtype
costs gliner itself on the same windows: the reference's bf16 run), entity lists exactly (unless a
score lands on the other side of the threshold, or overlapping candidates tie within the
tolerance). Two answers of one server to prompts batched differently (one text in two modes or
request forms) are held to twice that: each is within it of gliner's fp32 scores.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.core import envs
from vllm_factory.heads.gliner.prompts import split_words
from vllm_factory.heads.gliner.stats import CUT_NAME, WINDOWS_NAME
from vllm_factory.testing.gliner import long_cases
from vllm_factory.testing.gliner.long_cases import LABELS, make_cases
from vllm_factory.testing.gliner.parity import _near_tie, _same_side, _valid, only_near_threshold
from vllm_factory.testing.gliner.references import KIT_INPUTS, GLiNERReference, gliner_env
from vllm_factory.testing.parity import LibraryError, Tolerance, tolerance
from vllm_factory.testing.refenv import SCRIPTS, cached_artifact
from vllm_factory.testing.report import record
from vllm_factory.testing.requests import assert_refused

LONG_ENCODE = SCRIPTS / "gliner_long_encode.py"
# A case's request may wait this long: a 10,000-word text is hundreds of windows, and a CI host's
# two cores serve two lanes at once.
LONG_TIMEOUT_S = 900.0


def checkpoint_sizes(reference_dir: Path) -> tuple[int, int]:
    config = json.loads((reference_dir / "checkpoint" / "gliner_config.json").read_text())
    return int(config["max_len"]), int(config["max_width"])


@pytest.fixture(scope="module")
def long_reference(gliner_reference: GLiNERReference, reference_dir: Path) -> Path:
    """``cases.json``, gliner's merged entities (``ref-long.json``) and scores (``.npz``)."""
    max_len, max_width = checkpoint_sizes(reference_dir)

    def build(target: Path) -> None:
        cases = make_cases(max_len, max_width)
        (target / "cases.json").write_text(json.dumps(cases, ensure_ascii=False), "utf-8")
        gliner_env().run(
            LONG_ENCODE, "--checkpoint", reference_dir / "checkpoint",
            "--cases", target / "cases.json", "--out", target / "ref-long.json",
            "--scores", target / "ref-long.npz", "--bf16-scores", target / "ref-long-bf16.npz",
        )  # fmt: skip

    inputs = [gliner_reference.builder, *KIT_INPUTS, LONG_ENCODE, Path(long_cases.__file__)]
    return cached_artifact(f"{gliner_reference.name}-long", inputs, build)


def _request(case: dict, **extra) -> dict:
    data = {"text": case["text"], "labels": case["labels"], "threshold": case["threshold"],
            "flat_ner": case["flat_ner"], "multi_label": case["multi_label"],
            "window_overlap": case["overlap"], "long_text": "window", **extra}  # fmt: skip
    if case.get("input_spans") is not None:
        data["input_spans"] = [[{"start": s, "end": e} for s, e in case["input_spans"]]]
    return data


def _keys(entities: list[dict]) -> list[tuple]:
    return [(e["start"], e["end"], e["label"]) for e in entities]


CASES = ["one", "two_and_half", "ten", "nested", "multi_label", "no_overlap", "input_spans",
         "dense", "dense_short", "ten_thousand"]  # fmt: skip


@pytest.mark.parity
@pytest.mark.parametrize("name", CASES)
def test_long_texts_match_gliner_on_the_same_windows(name, ner, long_reference, server):
    cases = json.loads((long_reference / "cases.json").read_text("utf-8"))
    case, reference = cases[name], json.loads((long_reference / "ref-long.json").read_text())[name]
    expected = np.load(long_reference / "ref-long.npz")[f"scores_{name}"]
    # the case's threshold, or where it gives a candidate share, the one the reference chose
    threshold = reference["threshold"]
    served = ner(
        _request(case, threshold=threshold, return_scores=True, return_windows=True),
        timeout=LONG_TIMEOUT_S,
    )
    scores = np.asarray(served["scores"], dtype=np.float32)
    words = split_words(case["text"])
    limits = _limits(server, long_reference)
    assert served["windows"] == len(reference["windows"]) and served["truncated"] is False
    # every word gets a token in some window of gliner's own tokenizing (the dense texts: not
    # so for windows of max_len words alone)
    assert reference["unread"] == 0, reference["unread"]
    if name.startswith("dense"):
        assert reference["unread_by_words"] > 0 and len(reference["windows"]) > 1
    assert scores.shape == expected.shape
    valid = _valid(expected, len(words))
    worst = float(np.abs(scores - expected)[valid].max())
    record(server.label.removesuffix("_io"), "long_text", f"scores/{name}", {
        "dtype": server.dtype, "windows": served["windows"], "max_abs_diff": worst,
        "threshold": limits.score,
    })  # fmt: skip
    assert worst <= limits.score, (name, worst, limits.score)
    got, want = _keys(served["entities"]), _keys(reference["entities"])
    assert want, "no entity to compare: lower the case's threshold"
    if got != want:  # explained only by a flipped decision or a near tie
        assert not _same_side(scores, expected, len(words), threshold) or _near_tie(
            expected, len(words), threshold, limits
        ), (name, got, want)
        return
    scored = {(e["start"], e["end"], e["label"]): e["score"] for e in reference["entities"]}
    for entity in served["entities"]:
        key = (entity["start"], entity["end"], entity["label"])
        assert abs(entity["score"] - scored[key]) <= limits.score
        assert entity["text"] == case["text"][entity["start"] : entity["end"]]
    # spans across a window border are found (the texts of ten windows, with more borders than
    # two and a half: on the mmBERT bi-encoder's random weights two and a half had none above
    # its threshold, in the reference as in the server)
    if name in ("ten", "nested"):
        # a window's first word, and the first word after a window (read by the next alone)
        ends = {start for start, _ in reference["windows"][1:]}
        ends |= {end for _, end in reference["windows"][:-1]}
        crossing = [e for e in served["entities"]
                    if any(_word(words, e["start"]) < end <= _word(words, e["end"] - 1)
                           for end in ends)]  # fmt: skip
        assert crossing, "no entity across a window border"
    if name == "input_spans":
        allowed = {(s, e) for s, e in case["input_spans"]}
        assert {(e["start"], e["end"]) for e in served["entities"]} <= allowed


def _library_bf16_error(long_reference: Path) -> float:
    """gliner's own largest bf16 error over every case (|bf16 - fp32| of a span score, on the
    same windows): one yardstick for the whole set, as the parity suite takes it over its
    corpus (a per-case maximum is a noisy tail, too tight for the cases where it is small)."""
    cases = json.loads((long_reference / "cases.json").read_text("utf-8"))
    fp32, own = (
        np.load(long_reference / "ref-long.npz"),
        np.load(long_reference / "ref-long-bf16.npz"),
    )
    worst = 0.0
    for name, case in cases.items():
        expected = fp32[f"scores_{name}"]
        valid = _valid(expected, len(split_words(case["text"])))
        diff = np.abs(own[f"scores_{name}"].astype(np.float32) - expected)[valid]
        worst = max(worst, float(diff.max()))
    return worst


def _limits(server, long_reference: Path) -> Tolerance:
    """The tolerance of the server's dtype; below fp32, widened by what the same dtype costs
    gliner itself on the same windows (:func:`_library_bf16_error`)."""
    if server.dtype == "float32":
        return tolerance(server.dtype)
    return tolerance(server.dtype, LibraryError(max_abs_diff=_library_bf16_error(long_reference)))


def _pair_limits(server, long_reference: Path) -> Tolerance:
    """Between two answers of one server for the same text batched differently: twice
    :func:`_limits` (each answer is within it of gliner's fp32 scores)."""
    one = _limits(server, long_reference)
    return dataclasses.replace(one, score=2 * one.score, margin=2 * one.margin, tie=2 * one.tie)


def _agree(got: dict, want: dict, text: str, threshold: float, limits: Tolerance,
           columns: int | None = None) -> None:  # fmt: skip
    """Two scored answers for one text: scores (of the first ``columns`` labels) within
    ``limits.score``, entity lists equal unless a decision flipped or overlapping candidates
    tie."""
    n_words = len(split_words(text))
    a = np.asarray(got["scores"], dtype=np.float32)[..., :columns]
    b = np.asarray(want["scores"], dtype=np.float32)[..., :columns]
    assert a.shape == b.shape, (a.shape, b.shape)
    worst = float(np.abs(a - b)[_valid(b, n_words)].max())
    assert worst <= limits.score, (worst, limits.score)
    if _keys(got["entities"]) != _keys(want["entities"]):
        assert (
            not _same_side(a, b, n_words, threshold)
            or _near_tie(a, n_words, threshold, limits)
            or _near_tie(b, n_words, threshold, limits)
        ), (got["entities"], want["entities"])


def _word(words, char: int) -> int:
    """The index of the word holding character ``char``."""
    return next(i for i, w in enumerate(words) if w.start <= char < w.end)


def test_short_texts_answer_as_before(ner, corpus, reference_dir, server, long_reference):
    """A text within max_len is one window: the same prompts and decoding in every mode. (The
    same request twice may differ in the last float bits, as the engine's steps differ.)"""
    max_len, _ = checkpoint_sizes(reference_dir)
    texts = [t for t in corpus["texts"] if len(split_words(t)) <= max_len]
    data = {"text": texts, "labels": LABELS, "threshold": 0.3, "return_scores": True}
    before = ner({**data, "long_text": "truncate"})
    limits = _pair_limits(server, long_reference)
    for mode in ("window", "error", None):
        answer = ner({**data, "long_text": mode} if mode else data)
        for text, got, want in zip(texts, answer, before):
            _agree(got, want, text, 0.3, limits)


def test_truncate_error_and_return_windows(ner, server, long_reference, reference_dir):
    max_len, _ = checkpoint_sizes(reference_dir)
    cases = json.loads((long_reference / "cases.json").read_text("utf-8"))
    long, short = cases["two_and_half"]["text"], cases["one"]["text"]
    limits = _pair_limits(server, long_reference)
    data = {"text": [short, long], "labels": LABELS, "threshold": 0.3}
    scored = {**data, "return_windows": True, "return_scores": True}
    cut = ner({**scored, "long_text": "truncate"})
    assert [(r["windows"], r["truncated"]) for r in cut] == [(1, False), (1, True)]
    first = split_words(long)[max_len - 1].end
    assert all(e["end"] <= first for e in cut[1]["entities"])
    whole = ner({**scored, "long_text": "window"})
    assert [(r["windows"], r["truncated"]) for r in whole] == [(1, False), (3, False)]
    _agree(whole[0], cut[0], short, 0.3, limits)
    plain = ner({**data, "long_text": "window"})  # without return_windows: lists as before
    assert all(isinstance(r, list) for r in plain)
    for text, got, want in zip(data["text"], plain, whole):
        assert (
            _keys(got) == _keys(want["entities"])
            or only_near_threshold(got, want["entities"], 0.3, limits.margin)
            or _near_tie(np.asarray(want["scores"]), len(split_words(text)), 0.3, limits)
        ), (got, want["entities"])
    assert_refused(server, {**data, "long_text": "error"}, "data.text[1]")
    assert_refused(server, {**data, "text": long, "long_text": "error"}, "data.text")
    alone = ner({**data, "text": short, "long_text": "error", "return_scores": True})
    _agree(alone, whole[0], short, 0.3, limits)
    assert_refused(server, {**data, "window_overlap": max_len // 2 + 1}, "data.window_overlap")
    # max_len words with more tokens than a prompt leaves: windows read it whole, truncate says
    # what it cut, error refuses it
    dense = cases["dense_short"]["text"]
    assert len(split_words(dense)) == max_len
    data = {**data, "text": [short, dense]}
    cut = ner({**data, "long_text": "truncate", "return_windows": True})
    assert [(r["windows"], r["truncated"]) for r in cut] == [(1, False), (1, True)]
    whole = ner({**data, "long_text": "window", "return_windows": True})
    assert whole[0]["windows"] == 1 and whole[1]["windows"] > 1
    assert not any(r["truncated"] for r in whole)
    assert_refused(server, {**data, "long_text": "error"}, "data.text[1]")
    assert ner({**data, "window_overlap": max_len // 2, "long_text": "window"})


def test_windows_per_text_on_metrics(ner, server, long_reference):
    """Each text sent to the engine adds its windows to the API server's histogram, each cut
    text to the cut counter."""
    cases = json.loads((long_reference / "cases.json").read_text("utf-8"))
    long, short = cases["two_and_half"]["text"], cases["one"]["text"]

    def figures() -> tuple[float, float, float]:
        count = server.metric(f"{WINDOWS_NAME}_count").get((), 0.0)
        total = server.metric(f"{WINDOWS_NAME}_sum").get((), 0.0)
        return count, total, server.metric(f"{CUT_NAME}_total").get((), 0.0)

    before = figures()
    data = {"text": [short, long], "labels": LABELS, "return_windows": True}
    windows = [r["windows"] for r in ner({**data, "long_text": "window"})]
    assert windows[1] > 1
    ner({**data, "long_text": "truncate"})
    after = figures()
    assert after[0] - before[0] == 4
    assert after[1] - before[1] == sum(windows) + 2
    assert after[2] - before[2] == 1


def test_windows_are_bounded(server, long_reference):
    """Two 10,000-word texts of the tiny checkpoint's 48-word windows: over the window budget,
    refused before tokenizing."""
    cases = json.loads((long_reference / "cases.json").read_text("utf-8"))
    text = cases["ten_thousand"]["text"]
    data = {"text": [text, text], "labels": LABELS, "long_text": "window"}
    response = server.pooling(data)
    assert 400 <= response.status_code < 500, response.text
    assert "data.text" in response.text and envs.MAX_WINDOWS.name in response.text


def test_linking_reads_the_whole_text(ner, long_reference, server):
    """Both linking forms merge the windows at the span level before linking: the
    candidate_labels form links each entity to the best candidate label of its span's merged
    scores; candidates find the entities their labels find."""
    cases = json.loads((long_reference / "cases.json").read_text("utf-8"))
    case = cases["two_and_half"]
    links = ["Ada Lovelace", "Charles Babbage", "London"]
    limits = _pair_limits(server, long_reference)
    base = _request(case, return_scores=True)
    linked = ner({**base, "candidate_labels": links})
    plain = ner(base)
    _agree(linked, plain, case["text"], case["threshold"], limits, columns=len(LABELS))
    scores = np.asarray(linked["scores"])
    words = split_words(case["text"])
    for entity in linked["entities"]:
        first, last = _word(words, entity["start"]), _word(words, entity["end"] - 1)
        row = scores[first, last - first, len(LABELS) :]
        assert entity["linked_score"] == pytest.approx(float(row.max()), abs=1e-6)
        assert entity["linked_to"] in (links[int(row.argmax())], None)
    candidates = [{"id": i, "label": label} for i, label in enumerate(LABELS)]
    del base["labels"]
    found = ner({**base, "candidates": candidates})
    _agree(found, plain, case["text"], case["threshold"], limits)
    assert all(e["candidate_id"] == LABELS.index(e["label"]) for e in found["entities"])


__all__ = ["long_reference"] + [name for name in dir() if name.startswith("test_")]
