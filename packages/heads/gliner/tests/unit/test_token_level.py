"""Token-level GLiNER: the scorer, the decoder and the head's token path, each against a
plain restatement of what gliner's token model computes (written here from its definition)."""

import dataclasses
import itertools

import numpy as np
import pytest
import torch
from test_decoding import plain_greedy
from test_head import SETTINGS as TINY
from test_head import scored_as_alone
from vllm_factory.heads.gliner.decoding import TooManyCandidates
from vllm_factory.heads.gliner.head import GLiNERSpanHead
from vllm_factory.heads.gliner.prompts import WordLayout
from vllm_factory.heads.gliner.settings import (
    UnsupportedGLiNERConfig,
    parse_settings,
)
from vllm_factory.heads.gliner.token_level import (
    TokenScorer,
    decode_tokens,
    merge_word_scores,
    token_candidates,
)

ENT = 50
SETTINGS = dataclasses.replace(TINY, span_mode="token_level", encoder_model_type="deberta-v2")
BASE = {"encoder_config": {"hidden_size": 12, "model_type": "deberta-v2"}, "hidden_size": 8,
        "max_width": 3, "class_token_index": 50, "span_mode": "token_level"}  # fmt: skip


def joined_scorer(scorer: TokenScorer, words: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The scorer as gliner writes it: the MLP on the joined ``[t1; l1; t2 * l2]`` of every
    (word, label) pair."""
    width = scorer.width
    token = scorer.proj_token(words)
    label = scorer.proj_label(labels)
    n, c = words.shape[0], labels.shape[0]
    joined = torch.cat(
        (
            token[:, None, :width].expand(n, c, width),
            label[None, :, :width].expand(n, c, width),
            token[:, None, width:] * label[None, :, width:],
        ),
        -1,
    )
    return scorer.out_mlp(joined)


def test_scorer_equals_the_joined_mlp_and_chunks_change_nothing(monkeypatch):
    torch.manual_seed(0)
    scorer = TokenScorer(16).eval()
    words, labels = torch.randn(23, 16), torch.randn(5, 16)
    expected = joined_scorer(scorer, words, labels)
    got = scorer.logits(words, labels)
    assert got.shape == (23, 5, 3)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    from vllm_factory.heads.gliner import token_level

    monkeypatch.setitem(token_level.PAIR_CHUNK, "cpu", 5 * 64 * 2)  # two words at a time
    torch.testing.assert_close(scorer.logits(words, labels), got, rtol=0, atol=1e-6)
    assert scorer.logits(words[:0], labels).shape == (0, 5, 3)


def gliner_spans(scores: np.ndarray, threshold: float, allowed=None) -> list[tuple]:
    """gliner's token decoding, restated: every (start word, label) above the threshold, with
    every end word of that label above it at or after the start, whose inside scores are none
    below the threshold (compared as Python floats); score: the least of them."""
    rows = scores.tolist()
    n, c = scores.shape[0], scores.shape[1]
    starts = [(s, k) for s in range(n) for k in range(c) if scores[s, k, 0] > np.float32(threshold)]
    ends = [(e, k) for e in range(n) for k in range(c) if scores[e, k, 1] > np.float32(threshold)]
    found = []
    for s, k in starts:
        for e, k2 in ends:
            if e < s or k2 != k or (allowed is not None and (s, e) not in allowed):
                continue
            inside = [rows[p][k][2] for p in range(s, e + 1)]
            if any(v < threshold for v in inside):
                continue
            found.append((s, e, k, min(*inside, rows[s][k][0], rows[e][k][1])))
    return found


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(
    ("flat", "multi"), [(True, False), (False, False), (True, True), (False, True)]
)
def test_decoder_keeps_what_gliner_keeps(seed, flat, multi):
    rng = np.random.default_rng(seed)
    n, c = int(rng.integers(1, 30)), int(rng.integers(1, 5))
    # coarse values make exact ties (broken by gliner's listing order) common
    scores = (rng.integers(0, 20, (n, c, 3)) / 19).astype(np.float32)
    scores[:, :, 2] = np.maximum(scores[:, :, 2], rng.random((n, c)) > 0.3)  # long insides
    threshold = float(rng.choice([0.1, 0.3, 0.5, 0.7]))
    expected = plain_greedy(gliner_spans(scores, threshold), flat, multi)
    kept = decode_tokens(torch.from_numpy(scores), threshold, flat, multi)
    assert [tuple(k) for k in kept] == expected
    assert kept.candidates == len(gliner_spans(scores, threshold))
    allowed = {(int(s), int(s + w)) for s, w in rng.integers(0, n, (6, 2)) if s + w < n + 3}
    expected = plain_greedy(gliner_spans(scores, threshold, allowed), flat, multi)
    kept = decode_tokens(torch.from_numpy(scores), threshold, flat, multi, allowed)
    assert [tuple(k) for k in kept] == expected


def test_candidates_in_gliners_listing_order_and_threshold_comparisons():
    """Start and end above the threshold in float32; inside at least it, as a Python float."""
    t = 0.3
    just = float(np.float32(t))  # float32(0.3) is above 0.3 as a double
    scores = np.zeros((3, 2, 3), dtype=np.float32)
    scores[:, :, 2] = 1.0
    scores[0, 1, 0] = scores[0, 0, 0] = 0.9
    scores[2, 0, 1] = scores[1, 1, 1] = scores[2, 1, 1] = 0.8
    spans = token_candidates(scores, t)
    assert list(zip(spans.start, spans.label, spans.end)) == [(0, 0, 2), (0, 1, 1), (0, 1, 2)]
    scores[1, 1, 2] = just  # not below 0.3 as a double: kept
    assert len(token_candidates(scores, t).start) == 3
    scores[1, 1, 0] = just  # float32 compare: not above float32(0.3): no start there
    assert len(token_candidates(scores, t).start) == 3
    scores[1, 1, 2] = np.nextafter(np.float32(t), np.float32(0))  # below: spans through it go
    assert list(zip(*token_candidates(scores, t)[:3])) == [(0, 2, 0)]


def test_too_many_candidates_is_counted_before_spans_are_made():
    scores = torch.ones(40, 2, 3)
    with pytest.raises(TooManyCandidates) as error:
        decode_tokens(scores, 0.5, max_candidates=100)
    assert error.value.count == 2 * 40 * 41 // 2
    assert decode_tokens(scores[:0], 0.5) == []


def test_long_spans_have_no_width_limit():
    scores = torch.full((30, 1, 3), 0.9)
    scores[1:, :, 0] = scores[:-1, :, 1] = 0.1  # starts at word 0 only, ends at 29 only
    (span,) = decode_tokens(scores, 0.5)
    assert (span.start, span.end) == (0, 29)


def test_window_merge_takes_each_words_highest_score():
    a, b = torch.rand(5, 2, 3), torch.rand(5, 2, 3)
    merged = merge_word_scores([a, b], [(0, 5), (3, 8)], 8)
    assert merged.shape == (8, 2, 3)
    torch.testing.assert_close(merged[:3], a[:3])
    torch.testing.assert_close(merged[3:5], torch.maximum(a[3:], b[:2]))
    torch.testing.assert_close(merged[5:], b[2:])
    assert merge_word_scores([a], [(0, 5)], 5) is a


def token_head(**changes) -> GLiNERSpanHead:
    torch.manual_seed(0)
    return GLiNERSpanHead(dataclasses.replace(SETTINGS, **changes)).eval()


def test_head_scores_each_prompts_words_against_its_own_label_tokens():
    """Words (first sub-token, projected, BiLSTM) and the ``<<ENT>>`` vectors as they are (no
    prompt_rep_layer) through the scorer; batched prompts score as alone; dummies get
    ``[0, labels, 3]``."""
    model = token_head()
    names = {n for n, _ in model.named_parameters()}
    assert "scorer.out_mlp.3.weight" in names and "scorer.proj_label.bias" in names
    assert not any(n.startswith(("prompt_rep_layer", "span_rep_layer")) for n in names)
    shapes = [(2, (1, 2, 1)), (3, (2, 1, 1, 3, 0, 1)), (1, (1,))]
    prompts, hidden, together = scored_as_alone(
        model, shapes, 1, lambda labels, words: (words, labels, 3)
    )
    # by hand for the first prompt
    ids, _ = prompts[0]
    layout = WordLayout(6, (1, 2, 1))
    tokens = model.token_rep_layer.projection(hidden[0])
    rows = [layout.first_token + sum(layout.counts[:k]) for k in range(len(layout.counts))]
    words = model.rnn(tokens[rows][None], torch.tensor([len(rows)]))[0]
    labels = tokens[(ids == ENT).nonzero().flatten()]
    expected = torch.sigmoid(joined_scorer(model.scorer, words, labels))
    torch.testing.assert_close(together[0], expected, rtol=0, atol=1e-5)


def test_settings_accept_token_level_uni_encoders_only():
    settings = parse_settings(BASE)
    assert settings.token_level and settings.span_mode == "token_level"
    assert parse_settings({**BASE, "model_type": "gliner_uni_encoder_token"}).token_level
    assert not parse_settings({**BASE, "span_mode": "markerV0"}).token_level
    labels = {"labels_encoder": "x", "labels_encoder_config": {"hidden_size": 8}}
    for bad, match in [
        (labels, "token-level bi-encoder"),
        ({"represent_spans": True}, "represent_spans"),
        ({"model_type": "gliner_bi_encoder_token", **labels}, "token-level bi-encoder"),
    ]:
        with pytest.raises(UnsupportedGLiNERConfig, match=match):
            parse_settings({**BASE, **bad})


def test_all_spans_count_matches_listing():
    scores = np.ones((7, 3, 3), dtype=np.float32)
    spans = token_candidates(scores, 0.5)
    assert len(spans.start) == 3 * 7 * 8 // 2
    assert list(zip(spans.start, spans.label, spans.end))[:8] == list(
        itertools.islice(((0, k, e) for k in range(3) for e in range(7)), 8)
    )


def test_a_steps_scores_reach_the_host_in_one_copy_whatever_their_label_counts():
    """The GPU path's copy (joined, then split): prompts of one step with different label
    counts, which a plain ``torch.cat`` of ``[words, labels, 3]`` blocks cannot join."""
    from vllm_factory.heads.gliner.head import to_host

    parts = [torch.rand(4, 2, 3), torch.rand(1, 5, 3), torch.rand(0, 3, 3)]
    copied = to_host(parts)
    assert [c.shape for c in copied] == [p.shape for p in parts]
    assert all(torch.equal(c, p) for c, p in zip(copied, parts))
