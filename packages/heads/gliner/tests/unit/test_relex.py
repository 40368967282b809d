"""Relex GLiNER (relation extraction): the head's relation pass against a plain restatement of
what gliner's relex span model computes (written here from its definition), the packed wire
form, relation decoding and the settings a relex checkpoint is served or refused with."""

import dataclasses

import numpy as np
import pytest
import torch
from test_head import SETTINGS as TINY
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.heads.gliner import relex
from vllm_factory.heads.gliner.decoding import Candidate
from vllm_factory.heads.gliner.head import GLiNERSpanHead
from vllm_factory.heads.gliner.prompts import LAYOUT_KEY, WordLayout, prompt_key
from vllm_factory.heads.gliner.relex import (
    RELEX_KEY,
    RelexParts,
    decode_relations,
    pack,
    unpack,
)
from vllm_factory.heads.gliner.settings import UnsupportedGLiNERConfig, parse_settings
from vllm_factory.heads.gliner.step_plan import StepPlan

ENT, SEP, REL = 50, 51, 52
BASE = {"encoder_config": {"hidden_size": 12, "model_type": "deberta-v2"}, "hidden_size": 8,
        "max_width": 3, "class_token_index": ENT, "relations_layer": "mlp",
        "rel_token_index": REL}  # fmt: skip


def relex_head(layer: str) -> GLiNERSpanHead:
    settings = dataclasses.replace(TINY, relations_layer=layer, rel_token_index=REL)
    torch.manual_seed(0)
    model = GLiNERSpanHead(settings, cuda_graphs=False).eval()
    with torch.no_grad():  # scores spread over (0, 1), so the thresholds decide something
        model.prompt_rep_layer[-1].weight.mul_(20)
        model.pair_rep_layer[-1].weight.mul_(20)
        if layer in ("dot", "bilinear"):  # small span vectors: their products do not saturate
            last = model.span_rep_layer.span_rep_layer.out_project[-1]
            last.weight.mul_(0.05)
            last.bias.mul_(0.05)
    return model


def relex_prompt(labels: int, relations: int, counts: tuple[int, ...], seed: int):
    """``[CLS] (<<ENT>> l)* <<SEP>> (<<REL>> r)* <<SEP>> words... [SEP]`` and its layout."""
    ids = [1]
    for i in range(labels):
        ids += [ENT, 60 + i]
    ids.append(SEP)
    for i in range(relations):
        ids += [REL, 80 + i]
    ids.append(SEP)
    first = len(ids)
    gen = torch.Generator().manual_seed(seed)
    ids += torch.randint(100, 200, (sum(counts),), generator=gen).tolist() + [2]
    ids_t = torch.tensor(ids)
    return ids_t, {LAYOUT_KEY: {prompt_key(ids_t): WordLayout(first, counts).to_wire()}}


def plain_adjacency(model: GLiNERSpanHead, x: torch.Tensor, layer: str) -> torch.Tensor | None:
    if layer == "none":
        return None
    module = model.relations_rep_layer.relation_rep_layer
    if layer == "dot":
        return torch.sigmoid(x @ x.T)
    if layer == "bilinear":
        z = module.proj(x)
        return torch.sigmoid(z @ z.T)
    n = x.shape[0]
    out = torch.empty(n, n)
    for i in range(n):
        for j in range(n):
            out[i, j] = torch.sigmoid(module.mlp(torch.cat((x[i], x[j]))))[0]
    return out


def plain_relations(model, scores, words, tokens, ids, threshold, adjacency_threshold, layer):
    """gliner's relex forward for one text, restated: spans whose best label scores above the
    threshold (span order), their span vectors, the ordered pairs the adjacency keeps, each
    pair's projection against the <<REL>> token vectors."""
    marker = model.span_rep_layer.span_rep_layer
    n, width = words.shape[0], marker.max_width
    spans = marker(words)  # [words, max_width, d]
    keep = [(s, k) for s in range(n) for k in range(width)
            if s + k < n and float(scores[s, k].max()) > threshold]  # fmt: skip
    x = torch.stack([spans[s, k] for s, k in keep]) if keep else spans.new_zeros(0, 8)
    adjacency = plain_adjacency(model, x, layer)
    pairs = [(i, j) for i in range(len(keep)) for j in range(len(keep))
             if i != j and (adjacency is None or float(adjacency[i, j]) > adjacency_threshold)]  # fmt: skip
    rel = tokens[(ids == REL).nonzero().flatten()]
    probs = [torch.sigmoid(model.pair_rep_layer(torch.cat((x[i], x[j]))) @ rel.T) for i, j in pairs]
    return keep, pairs, probs


def candidate_vectors(model, scores, words, threshold):
    marker = model.span_rep_layer.span_rep_layer
    n, width = words.shape[0], marker.max_width
    spans = marker(words)
    keep = [(s, k) for s in range(n) for k in range(width)
            if s + k < n and float(scores[s, k].max()) > threshold]  # fmt: skip
    return torch.stack([spans[s, k] for s, k in keep])


@pytest.mark.parametrize("layer", ["none", "dot", "bilinear", "mlp"])
@torch.no_grad()
def test_relations_equal_the_plain_relex_forward(layer):
    """Three prompts in one step, each with thresholds that keep some of its spans and pairs
    (a random head's scores cluster: set from its own scores), against the restatement."""
    model = relex_head(layer)
    shapes = [(2, 3, (1, 2, 1, 1, 1, 2)), (3, 2, (1, 1, 1)), (1, 1, (2, 1, 1, 1, 1, 1, 1))]
    prompts = [relex_prompt(*shape, seed) for seed, shape in enumerate(shapes)]
    torch.manual_seed(1)
    hidden = [torch.randn(len(ids), 12) for ids, _ in prompts]
    plain = model(hidden, [PoolerRequest(token_ids=ids, extra=e) for ids, e in prompts])
    plan = StepPlan.build(
        [h.shape[0] for h in hidden],
        [model.label_positions(ids) for ids, _ in prompts],
        [WordLayout.from_wire(next(iter(e[LAYOUT_KEY].values()))) for _, e in prompts],
        "first",
    )
    kept: dict = {}
    model.score(hidden, plan, None, kept)
    rows_of = {original: rows for original, rows, _ in plan.blocks()}
    thresholds = []
    for i, scores in enumerate(plain):
        words = kept["words"][rows_of[i]]
        best = [float(scores[s, k].max()) for s in range(words.shape[0]) for k in range(3)
                if s + k < words.shape[0]]  # fmt: skip
        threshold = float(np.quantile(best, 0.3))
        x = candidate_vectors(model, scores, words, threshold)
        adjacency = plain_adjacency(model, x, layer)
        off = ~torch.eye(x.shape[0], dtype=torch.bool)
        values = None if adjacency is None else adjacency[off]
        middle = 0.5 if values is None else float(values.min() + values.max()) / 2
        thresholds.append([threshold, middle])
    requests = [PoolerRequest(token_ids=ids, extra={**extra, RELEX_KEY: t})
                for (ids, extra), t in zip(prompts, thresholds)]  # fmt: skip
    out = model(hidden, requests)
    offsets = np.cumsum([0, *[h.shape[0] for h in hidden[:-1]]])
    total_pairs = 0
    for original, rows in rows_of.items():
        labels, relations, counts = shapes[original]
        scores = plain[original]
        parts = unpack(out[original], len(counts), 3, labels, relations)
        assert parts is not None and not parts.overflow
        torch.testing.assert_close(parts.scores, scores, rtol=0, atol=0)
        ids = requests[original].token_ids
        tokens = kept["tokens"][offsets[original] : offsets[original] + len(ids)]
        keep, pairs, probs = plain_relations(
            model, scores, kept["words"][rows], tokens, ids, *thresholds[original], layer
        )
        assert list(zip(parts.starts.tolist(), (parts.ends - parts.starts).tolist())) == keep
        assert [tuple(p) for p in parts.pairs.tolist()] == pairs
        assert 0 < len(pairs) < len(keep) * (len(keep) - 1) or layer == "none"
        torch.testing.assert_close(
            torch.from_numpy(parts.relation_scores), torch.stack(probs), rtol=0, atol=1e-6
        )
        total_pairs += len(pairs)
    assert total_pairs > 0


def test_more_candidates_than_the_pairing_limit_is_an_overflow_not_an_error(monkeypatch):
    monkeypatch.setattr(relex, "MAX_RELATION_ENTITIES", 2)
    model = relex_head("none")
    ids, extra = relex_prompt(2, 1, (1, 1, 1, 1), 0)
    request = PoolerRequest(token_ids=ids, extra={**extra, RELEX_KEY: [0.0, 0.0]})
    (out,) = model([torch.randn(len(ids), 12)], [request])
    parts = unpack(out, 4, 3, 2, 1)
    assert parts.overflow == 4 * 3 - 3  # every span inside the text
    assert not len(parts.pairs)


def test_without_thresholds_a_relex_prompt_gets_plain_span_scores():
    model = relex_head("mlp")
    ids, extra = relex_prompt(2, 1, (1, 2), 0)
    (out,) = model([torch.randn(len(ids), 12)], [PoolerRequest(token_ids=ids, extra=extra)])
    assert out.shape == (2, 3, 2)
    assert unpack(out, 2, 3, 2, 1) is None


def test_pack_and_unpack_round_trip_and_refuse_what_does_not_add_up():
    scores = torch.rand(4, 3, 2)
    starts, ends = np.array([0, 2]), np.array([1, 2])
    pairs = np.array([[0, 1], [1, 0]])
    probs = torch.rand(2, 5)
    flat = pack(scores, starts, ends, pairs, probs)
    parts = unpack(flat, 4, 3, 2, 5)
    assert torch.equal(parts.scores, scores)
    assert parts.starts.tolist() == [0, 2] and parts.ends.tolist() == [1, 2]
    assert parts.pairs.tolist() == [[0, 1], [1, 0]]
    np.testing.assert_array_equal(parts.relation_scores, probs.numpy())
    assert unpack(flat, 4, 3, 2, 4) is None  # another relation count
    assert unpack(flat[:-1], 4, 3, 2, 5) is None
    assert unpack(scores, 4, 3, 2, 5) is None  # an unscored prompt's score tensor
    none = unpack(pack(scores, starts[:0], ends[:0], pairs[:0], None), 4, 3, 2, 5)
    assert none.relation_scores.shape == (0, 5) and not none.overflow


def test_relations_map_candidates_to_the_first_decoded_entity_of_their_span():
    parts = RelexParts(
        scores=torch.zeros(0),
        starts=np.array([0, 1, 3]),
        ends=np.array([0, 2, 3]),
        pairs=np.array([[0, 1], [1, 0], [0, 2], [2, 1]]),
        relation_scores=np.array(
            [[0.9, 0.5], [0.6, 0.7], [0.99, 0.99], [0.51, 0.2]], dtype=np.float32
        ),
    )
    # entity 2 shares entity 1's span (multi-label): candidates map to entity 1; the
    # candidate (3, 3) was not decoded (greedy decoding dropped it): its pairs are dropped.
    kept = [Candidate(0, 0, 0, 0.9), Candidate(1, 2, 0, 0.8), Candidate(1, 2, 1, 0.7)]
    found = decode_relations(parts, kept, ["r0", "r1"], 0.5)
    assert [(h, r, t) for h, r, t, _ in found] == [(0, "r0", 1), (1, "r0", 0), (1, "r1", 0)]
    assert found[0][3] == pytest.approx(0.9)  # strictly above the threshold: 0.5 is out


def test_relex_settings_are_served_and_their_unsupported_forms_refused():
    settings = parse_settings(BASE)
    assert settings.relex and settings.relations_layer == "mlp"
    assert settings.rel_token == "<<REL>>" and settings.rel_token_index == REL
    assert not parse_settings({**BASE, "relations_layer": None}).relex
    assert parse_settings({**BASE, "relations_layer": "none"}).relations_layer == "none"
    typed = {**BASE, "model_type": "gliner_uni_encoder_span_relex"}
    assert parse_settings(typed).relex
    for bad, match in [
        ({"relations_layer": "gat"}, "relations_layer 'gat'"),
        ({"triples_layer": "distmult"}, "triples_layer"),
        ({"span_mode": "token_level"}, "token-level relex"),
        ({"model_type": "gliner_uni_encoder_token_relex"}, "token-level relex"),
        ({"rel_token_index": -1}, "rel_token_index"),
        ({"relations_layer": None, "model_type": "gliner_uni_encoder_span_relex"},
         "without a relations_layer"),
    ]:  # fmt: skip
        with pytest.raises(UnsupportedGLiNERConfig, match=match):
            parse_settings({**BASE, **bad})


def test_relex_head_takes_gliners_weight_names():
    names = set(dict(relex_head("mlp").named_parameters()))
    assert {"pair_rep_layer.0.weight", "pair_rep_layer.3.bias",
            "relations_rep_layer.relation_rep_layer.mlp.0.weight",
            "relations_rep_layer.relation_rep_layer.mlp.2.bias"} <= names  # fmt: skip
    assert "relations_rep_layer.relation_rep_layer.proj.weight" in set(
        dict(relex_head("bilinear").named_parameters())
    )
    assert not any(
        n.startswith("relations_rep_layer") for n, _ in relex_head("none").named_parameters()
    )


def test_relation_fields_of_the_request():
    from pydantic import ValidationError
    from vllm_factory.heads.gliner.request import GLiNERRequest

    ok = GLiNERRequest(text="a b", labels=["x"], relations=["r", "r"], relation_threshold=0.2)
    assert ok.labels_problem() is None and ok.adjacency_threshold is None
    for fields, field in [
        ({"relation_threshold": 0.5}, "data.relation_threshold"),
        ({"adjacency_threshold": 0.5}, "data.adjacency_threshold"),
        ({"relations": ["r"], "candidate_labels": ["c"]}, "data.candidate_labels"),
    ]:
        problem = GLiNERRequest(text="a b", labels=["x"], **fields).labels_problem()
        assert problem is not None and problem[0] == field and field in problem[1]
    for fields in ({"relations": []}, {"relations": [" "]}, {"relation_threshold": 1.5},
                   {"adjacency_threshold": -0.1}, {"relations": "r"}):  # fmt: skip
        with pytest.raises(ValidationError):
            GLiNERRequest(text="a b", labels=["x"], **fields)
