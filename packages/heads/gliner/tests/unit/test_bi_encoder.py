"""Bi-encoder GLiNER in the head: settings, the label encoder and its cache, batching, and
prompts the engine must not score (vLLM's dummy runs), on a tiny random BERT label encoder."""

import dataclasses

import pytest
import torch
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.heads.gliner.head import GLiNERSpanHead
from vllm_factory.heads.gliner.labels import (
    LABELS_KEY,
    LabelVectorCache,
    cache_size_from_env,
    label_ids_for,
    mean_pool,
)
from vllm_factory.heads.gliner.prompts import LAYOUT_KEY, WordLayout, prompt_key
from vllm_factory.heads.gliner.settings import UnsupportedGLiNERConfig, parse_settings

LABELS_CONFIG = {
    "model_type": "bert", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 32, "vocab_size": 60, "max_position_embeddings": 32,
    "pad_token_id": 0, "architectures": ["BertModel"], "transformers_version": "5.3.0",
}  # fmt: skip
CONFIG = {
    "encoder_config": {"hidden_size": 12, "model_type": "deberta-v2"}, "hidden_size": 8,
    "max_width": 3, "class_token_index": -1, "labels_encoder": "some/bert",
    "labels_encoder_config": LABELS_CONFIG, "num_rnn_layers": 1,
}  # fmt: skip


def head() -> GLiNERSpanHead:
    torch.manual_seed(0)
    return GLiNERSpanHead(parse_settings(CONFIG)).eval()


def request(counts: tuple[int, ...], labels: list[list[int]], seed: int) -> PoolerRequest:
    """``[CLS] words... [SEP]`` (no label prompt) with its layout and label ids."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.tensor([1, *torch.randint(100, 200, (sum(counts),), generator=gen).tolist(), 2])
    layouts = {prompt_key(ids): WordLayout(1, counts).to_wire()}
    return PoolerRequest(token_ids=ids, extra={LAYOUT_KEY: layouts, LABELS_KEY: labels})


def test_settings_accept_bi_encoders_and_refuse_what_does_not_match():
    settings = parse_settings(CONFIG)
    assert settings.bi_encoder and settings.labels_encoder_hidden_size == 16
    assert not settings.runs_rnn  # gliner's bi-encoder span model never calls its LSTM
    assert not parse_settings({**CONFIG, "labels_encoder_config": None, "labels_encoder": None,
                               "class_token_index": 5}).bi_encoder  # fmt: skip
    for bad, match in [
        ({"labels_encoder_config": None}, "labels_encoder_config"),
        ({"labels_encoder_config": {"model_type": "bert"}}, "labels_encoder_config"),
        ({"model_type": "gliner_uni_encoder_span"}, "does not match"),
        ({"model_type": "gliner_bi_encoder_token"}, "model_type"),
        ({"post_fusion_schema": "l2l"}, "post-fusion"),
    ]:
        with pytest.raises(UnsupportedGLiNERConfig, match=match):
            parse_settings({**CONFIG, **bad})


def test_label_vectors_are_the_encoders_mean_pooled_output_projected():
    model = head()
    ids = [[1, 5, 6, 2], [1, 7, 2]]
    layer = model.token_rep_layer
    assert not layer.labels_encoder.model.training
    vectors = model.label_vectors(ids, torch.device("cpu"))
    for row, label in zip(vectors, ids):
        tokens = layer.labels_encoder.model(input_ids=torch.tensor([label]))[0]
        pooled = mean_pool(layer.labels_projection(tokens), torch.ones(1, len(label)))
        torch.testing.assert_close(row, model.prompt_rep_layer(pooled)[0], rtol=0, atol=1e-6)


def test_a_batched_step_scores_every_prompt_as_it_alone_and_caches_labels():
    """Prompts with different texts and label lists (one label shared, one repeated within
    the step) among dummy prompts: each equals that prompt alone; each distinct label is
    encoded once, later steps hit the cache."""
    model = head()
    a, b, c = [1, 5, 6, 2], [1, 7, 2], [1, 8, 9, 10, 2]
    requests = [
        request((1, 2, 1), [a, b], 0),
        PoolerRequest(token_ids=torch.zeros(4, dtype=torch.long), extra={}),  # dummy run
        request((2, 1, 1, 3, 0, 1), [b, c, a], 1),
        request((1,), [c], 2),
    ]
    torch.manual_seed(1)
    hidden = [torch.randn(len(r.token_ids), 12) for r in requests]
    together = model(hidden, requests)
    assert model.label_cache.stats() == {
        "hits": 3, "misses": 3, "evictions": 0, "size": 3, "capacity": cache_size_from_env(),
    }  # fmt: skip
    assert together[1].shape == (0, 3, 0)
    for i, labels in ((0, 2), (2, 3), (3, 1)):
        (alone,) = model([hidden[i]], [requests[i]])
        assert together[i].shape == alone.shape
        assert alone.shape[2] == labels
        torch.testing.assert_close(together[i], alone, rtol=0, atol=1e-6)
    assert model.label_cache.misses == 3  # everything later came from the cache


def test_the_lstm_is_not_run_like_gliner():
    model = head()
    req = request((1, 2, 1), [[1, 5, 2]], 0)
    hidden = [torch.randn(len(req.token_ids), 12)]
    (before,) = model(hidden, [req])
    with torch.no_grad():
        for param in model.rnn.parameters():
            param.add_(1.0)
    (after,) = model(hidden, [req])
    torch.testing.assert_close(before, after, rtol=0, atol=0)


@pytest.mark.parametrize(
    "labels", [None, [], [[]], [[1, -2]], [[1, 2.5]], "x", [[1, 2], "ab"], {"a": 1}]
)
def test_missing_or_malformed_label_ids_get_empty_scores_never_an_error(labels):
    model = head()
    req = request((1, 2), [[1, 5, 2]], 0)
    extra = dict(req.extra)
    if labels is None:
        del extra[LABELS_KEY]
    else:
        extra[LABELS_KEY] = labels
    assert label_ids_for(extra) is None
    bad = PoolerRequest(token_ids=req.token_ids, extra=extra)
    hidden = torch.randn(len(req.token_ids), 12)
    empty, scored = model([hidden, hidden], [bad, req])
    assert empty.shape[0] == 0 and scored.shape == (2, 3, 1)


def test_cache_is_bounded_least_recently_used_first_out():
    cache = LabelVectorCache(capacity=2)
    calls = []

    def encode(missing):
        calls.append([list(m) for m in missing])
        return torch.stack([torch.full((3,), float(sum(m))) for m in missing])

    first = cache.vectors([[1], [2], [1]], encode)
    assert calls == [[[1], [2]]] and first[:, 0].tolist() == [1.0, 2.0, 1.0]
    cache.vectors([[1]], encode)  # 1 is now the most recent
    cache.vectors([[3]], encode)  # evicts 2
    cache.vectors([[1], [2]], encode)  # 1 hit, 2 encoded again (evicts 3)
    assert calls[-1] == [[2]]
    assert cache.stats() == {"hits": 3, "misses": 4, "evictions": 2, "size": 2, "capacity": 2}
    off = LabelVectorCache(capacity=0)
    off.vectors([[1]], encode)
    off.vectors([[1]], encode)
    assert off.misses == 2 and len(off) == 0


def test_cache_size_from_the_environment(monkeypatch):
    monkeypatch.setenv("VLLM_FACTORY_GLINER_LABEL_CACHE", "12")
    assert cache_size_from_env() == 12
    for bad in ("-1", "many"):
        monkeypatch.setenv("VLLM_FACTORY_GLINER_LABEL_CACHE", bad)
        with pytest.raises(ValueError, match="VLLM_FACTORY_GLINER_LABEL_CACHE"):
            cache_size_from_env()


def test_load_weights_takes_the_label_encoder_and_its_buffers():
    model = head()
    names = dict(model.named_parameters())
    assert "token_rep_layer.labels_encoder.model.embeddings.word_embeddings.weight" in names
    assert "token_rep_layer.labels_projection.weight" in names
    buffers = dict(model.named_buffers())
    weights = [(n, torch.ones_like(t)) for n, t in names.items()]
    weights += [(n, torch.zeros_like(t)) for n, t in buffers.items()]
    assert model.load_weights(weights) == set(names)
    assert bool((model.prompt_rep_layer[0].weight == 1).all())


def test_no_label_projection_when_the_widths_agree():
    model = GLiNERSpanHead(dataclasses.replace(parse_settings(CONFIG), hidden_size=16))
    assert not hasattr(model.token_rep_layer, "labels_projection")
    assert hasattr(model.token_rep_layer, "projection")  # the text encoder's 12 -> 16


def test_label_ids_the_label_encoder_cannot_take_get_empty_scores():
    model = head()
    vocab = model.label_limits["vocab_size"]
    positions = model.label_limits["max_tokens"]
    assert vocab and positions
    req = request((1, 2), [[1, 5, 2]], 0)
    hidden = torch.randn(len(req.token_ids), 12)
    for labels in ([[1, vocab]], [[1] * (positions + 1)]):
        extra = {**req.extra, LABELS_KEY: labels}
        assert label_ids_for(extra, **model.label_limits) is None
        (empty,) = model([hidden], [PoolerRequest(token_ids=req.token_ids, extra=extra)])
        assert empty.shape[0] == 0
    assert label_ids_for({LABELS_KEY: [[vocab - 1] * positions]}, **model.label_limits)
