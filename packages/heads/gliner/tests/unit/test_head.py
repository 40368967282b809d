import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import torch
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.heads.gliner import span_graphs, word_lstm
from vllm_factory.heads.gliner.decoding import UnscoredText, checked_scores
from vllm_factory.heads.gliner.head import GLiNERSpanHead
from vllm_factory.heads.gliner.prompts import LAYOUT_KEY, WordLayout, prompt_key
from vllm_factory.heads.gliner.settings import (
    GLiNERSettings,
    UnsupportedGLiNERConfig,
    parse_settings,
)
from vllm_factory.heads.gliner.step_plan import StepPlan

ENT = 50

SETTINGS = GLiNERSettings(
    hidden_size=8, encoder_hidden_size=12, max_width=3, max_len=100, span_mode="markerV0",
    subtoken_pooling="first", num_rnn_layers=1, embed_ent_token=True, class_token_index=ENT,
    ent_token="<<ENT>>", sep_token="<<SEP>>", words_splitter_type="whitespace",
    encoder_model_type="modernbert",
)  # fmt: skip


def head(cuda_graphs: bool = True, **changes) -> GLiNERSpanHead:
    torch.manual_seed(0)
    return GLiNERSpanHead(dataclasses.replace(SETTINGS, **changes), cuda_graphs=cuda_graphs).eval()


def test_output_shape_and_range():
    model = head()
    ids = torch.tensor([1, ENT, 7, ENT, 8, 51, 20, 21, 22, 23, 2])
    layout = WordLayout(6, (1, 2, 1))
    request = PoolerRequest(token_ids=ids, extra={LAYOUT_KEY: {prompt_key(ids): layout.to_wire()}})
    (out,) = model([torch.randn(len(ids), 12)], [request])
    assert out.shape == (3, 3, 2) and out.dtype == torch.float32
    assert bool(((out > 0) & (out < 1)).all())


@pytest.mark.parametrize(("dtype", "inside"), [(torch.float32, "ieee"), (torch.bfloat16, None)])
def test_float32_lstm_runs_without_tf32(monkeypatch, dtype, inside):
    """cuDNN runs float32 RNNs in TF32 by default (1.7e-4 off gliner's CPU scores on an H100):
    the float32 head asks for IEEE float32 around its LSTM and restores the setting after."""
    rnn = getattr(torch.backends.cudnn, "rnn", None)
    if rnn is None:
        pytest.skip("torch < 2.9: no per-operation cuDNN precision")
    model = head().to(dtype)
    before, seen = rnn.fp32_precision, []
    original = model.rnn.lstm.forward
    monkeypatch.setattr(
        model.rnn.lstm,
        "forward",
        lambda *a: seen.append(rnn.fp32_precision) or original(*a),
    )
    ids = torch.tensor([1, ENT, 7, ENT, 8, 51, 20, 21, 22, 23, 2])
    layout = WordLayout(6, (1, 2, 1))
    request = PoolerRequest(token_ids=ids, extra={LAYOUT_KEY: {prompt_key(ids): layout.to_wire()}})
    model([torch.randn(len(ids), 12, dtype=dtype)], [request])
    assert seen == [inside or before] and rnn.fp32_precision == before


@pytest.mark.parametrize("layers", [1, 2])
@torch.no_grad()
def test_word_lstm_through_the_kernel_layer_matches_nn_lstm(layers):
    """The opt-in GPU path (``by_kernel``: both directions' input gates in one GEMM, then
    ``vllm_factory.kernels.bidirectional_lstm`` per layer), run here with the kernel's PyTorch
    fallback, equals the path CPUs take (and what cuDNN's packed LSTM computes)."""
    rnn = head(num_rnn_layers=layers).rnn
    words, lengths = torch.randn(3, 7, 8), torch.tensor([7, 4, 1])
    words[1, 4:] = words[2, 1:] = 0  # padding, as the head fills it
    expected = rnn(words, lengths)
    torch.testing.assert_close(rnn.by_kernel(words, lengths, backend="torch"), expected)


@pytest.mark.parametrize("layers", [1, 2])
@torch.no_grad()
def test_word_lstm_by_directions_matches_the_packed_bilstm(layers):
    """The body of the opt-in CUDA-graph path (``by_directions``: each direction as its own
    unidirectional LSTM over the padded batch, the backward one over each text reversed within
    its length) equals the packed BiLSTM at every real word; past a text's length its values
    differ and the head never reads them."""
    rnn = head(num_rnn_layers=layers).rnn
    words, lengths = torch.randn(4, 9, 8), torch.tensor([9, 6, 3, 1])
    for row, length in enumerate(lengths.tolist()):
        words[row, length:] = torch.randn(9 - length, 8)  # stale values, as in a graph's buffer
    expected = rnn(words, lengths)
    got = rnn.by_directions(words, lengths)
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(got[row, :length], expected[row, :length])
    # built once, then reused; not in the state dict (which keeps gliner's names)
    assert rnn._directions and rnn.by_directions(words, lengths).shape == expected.shape
    assert all(key.startswith("lstm.") for key in rnn.state_dict())


def test_lstm_graphs_follow_the_switch_the_device_and_enforce_eager(monkeypatch):
    """``takes_graphs``: unless turned off, on a GPU (a stand-in here), for a head of a server
    that is not eager (``GLiNERSpanHead(cuda_graphs=not enforce_eager)``), until a capture
    fails."""
    import types

    on_gpu = types.SimpleNamespace(is_cuda=True)
    monkeypatch.delenv(word_lstm.LSTM_GRAPHS_ENV, raising=False)
    rnn = head().rnn
    assert rnn.takes_graphs(on_gpu) and not rnn.takes_graphs(torch.zeros(1))
    assert not head(cuda_graphs=False).rnn.takes_graphs(on_gpu)  # --enforce-eager
    rnn.graphs.failed = True
    assert not rnn.takes_graphs(on_gpu)
    monkeypatch.setenv(word_lstm.LSTM_GRAPHS_ENV, "0")
    assert not head().rnn.takes_graphs(on_gpu)


def test_lstm_graphs_are_on_unless_turned_off(monkeypatch):
    """CUDA graphs of the BiLSTM unless ``VLLM_FACTORY_GLINER_LSTM_GRAPHS=0``; a CPU head never
    asks."""

    monkeypatch.delenv(word_lstm.LSTM_GRAPHS_ENV, raising=False)
    assert word_lstm.lstm_graphs_wanted()
    for value, wanted in (("1", True), ("0", False), (" 0 ", False)):
        monkeypatch.setenv(word_lstm.LSTM_GRAPHS_ENV, value)
        assert word_lstm.lstm_graphs_wanted() is wanted
    monkeypatch.delenv(word_lstm.LSTM_GRAPHS_ENV)
    rnn = head().rnn
    rnn.by_graph = lambda *args: pytest.fail("a CPU head asked for a CUDA graph")
    words, lengths = torch.randn(2, 3, 8), torch.tensor([3, 2])
    assert rnn(words, lengths).shape == (2, 3, 8)


def test_word_lstm_kernel_path_gives_the_kernel_no_autograd_inputs(monkeypatch):
    """With grad enabled (as outside vLLM's inference mode) the stacked LSTM weights must not
    need autograd: ``backend="auto"`` sends such inputs to the per-step fallback."""
    seen = []
    monkeypatch.setattr(
        word_lstm,
        "bidirectional_lstm",
        lambda gates, w_hh, lengths, backend, per_step: (
            seen.append((w_hh.requires_grad, per_step))
            or gates.new_zeros(*gates.shape[:2], 2 * w_hh.shape[-1])
        ),
    )
    rnn = head().rnn
    rnn.by_kernel(torch.randn(2, 3, 8), torch.tensor([3, 2]))
    rnn.by_kernel(torch.randn(2, 3, 8), torch.tensor([3, 2]), per_step=True)
    assert seen == [(False, False), (False, True)]


@pytest.mark.parametrize(
    ("env", "is_cuda", "dtype", "steps"),
    [
        # By default a 16-bit head's BiLSTM graphs hold the per-step kernel (it beat cuDNN's
        # cell served, docs/benchmarks/deberta_gliner.md); "cudnn" keeps cuDNN's cell.
        ("", True, torch.bfloat16, True),
        ("steps", True, torch.float16, True),
        ("STEPS", True, torch.bfloat16, True),
        ("cudnn", True, torch.bfloat16, False),
        # A float32 head (``--hf-overrides '{"head_dtype": "float32"}'``) stays on cuDNN: the
        # kernels' float32 variants are many times slower.
        ("", True, torch.float32, False),
        ("steps", True, torch.float32, False),
        ("", False, torch.bfloat16, False),
    ],
)
def test_lstm_kernels_only_for_16_bit_heads_on_gpus(monkeypatch, env, is_cuda, dtype, steps):
    """The served head's choice, without a GPU: only ``is_cuda`` and ``dtype`` are read (and
    Triton taken as importable, as on a CUDA host)."""
    import types

    import vllm_factory.kernels._dispatch as dispatch

    monkeypatch.setenv(word_lstm.LSTM_KERNEL_ENV, env)
    monkeypatch.delenv("VLLM_FACTORY_DISABLE_TRITON", raising=False)
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    words = types.SimpleNamespace(is_cuda=is_cuda, dtype=dtype, requires_grad=False)
    assert word_lstm.lstm_step_kernel_wanted(words) is steps


@pytest.mark.parametrize("value", ["1", "0", "kernel"])
def test_the_one_launch_lstm_kernel_is_no_longer_offered(monkeypatch, value):
    """``VLLM_FACTORY_GLINER_LSTM_KERNEL=1`` chose the one-launch kernel, an opt-in that lost
    to cuDNN served: it and any other value but steps / cudnn now stop the server at start-up
    (``envs.check_all``, from the plugin's registration), naming the variable."""
    from vllm_factory.core import envs

    monkeypatch.setenv(envs.GLINER_LSTM_KERNEL.name, value)
    with pytest.raises(ValueError, match=envs.GLINER_LSTM_KERNEL.name) as raised:
        envs.check_all()
    assert ("no longer offered" in str(raised.value)) is (value == "1")


def test_only_a_float32_head_that_asked_for_a_kernel_is_told_it_keeps_cudnn(monkeypatch):
    import types

    import vllm_factory.kernels._dispatch as dispatch

    said = []
    monkeypatch.setattr(word_lstm, "_say_float32_head_keeps_cudnn", lambda *a: said.append(a))
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    monkeypatch.delenv("VLLM_FACTORY_DISABLE_TRITON", raising=False)
    words = types.SimpleNamespace(is_cuda=True, dtype=torch.float32, requires_grad=False)
    monkeypatch.delenv(word_lstm.LSTM_KERNEL_ENV, raising=False)
    assert not word_lstm.lstm_step_kernel_wanted(words)
    assert said == []  # the default says nothing
    monkeypatch.setenv(word_lstm.LSTM_KERNEL_ENV, "steps")
    assert not word_lstm.lstm_step_kernel_wanted(words)
    assert said == [(torch.float32, "steps")]


def test_no_lstm_kernel_where_triton_is_off(monkeypatch):
    """``VLLM_FACTORY_DISABLE_TRITON=1`` (the GPU check's kernels-off jobs) keeps cuDNN rather
    than sending the BiLSTM to the kernel's step-by-step PyTorch fallback; so does a host where
    Triton does not import."""
    import types

    import vllm_factory.kernels._dispatch as dispatch

    words = types.SimpleNamespace(is_cuda=True, dtype=torch.bfloat16, requires_grad=False)
    monkeypatch.setenv(word_lstm.LSTM_KERNEL_ENV, "steps")
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    assert word_lstm.lstm_step_kernel_wanted(words)
    monkeypatch.setenv("VLLM_FACTORY_DISABLE_TRITON", "1")
    assert not word_lstm.lstm_step_kernel_wanted(words)
    monkeypatch.delenv("VLLM_FACTORY_DISABLE_TRITON")
    monkeypatch.setattr(dispatch, "triton_available", lambda: False)
    assert not word_lstm.lstm_step_kernel_wanted(words)
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    with torch.enable_grad():  # autograd through the weights: the fallback's job
        assert not word_lstm.lstm_step_kernel_wanted(
            types.SimpleNamespace(is_cuda=True, dtype=torch.bfloat16, requires_grad=True)
        )


def test_float32_head_on_the_cpu_never_takes_the_kernel(monkeypatch):

    monkeypatch.setenv(word_lstm.LSTM_KERNEL_ENV, "steps")
    monkeypatch.setattr(word_lstm, "bidirectional_lstm", lambda *a, **k: pytest.fail("kernel"))
    rnn = head().rnn
    assert rnn(torch.randn(2, 3, 8), torch.tensor([3, 2])).shape == (2, 3, 8)


def test_spans_past_the_text_use_span_zero_zero_like_gliner():
    spans = head().span_rep_layer.span_rep_layer(torch.randn(4, 8))
    assert torch.equal(spans[3, 1], spans[0, 0]) and torch.equal(spans[2, 2], spans[0, 0])
    assert not torch.equal(spans[1, 1], spans[0, 0])


def test_texts_back_to_back_each_end_at_their_own_last_word():
    """Words of two texts in one batch (4 + 2 rows): a span past the second text's end is
    that text's span (0, 0), never a span into its neighbour's words."""
    marker = head().span_rep_layer.span_rep_layer
    words = torch.randn(6, 8)
    first, length = torch.tensor([0, 0, 0, 0, 4, 4]), torch.tensor([4, 4, 4, 4, 2, 2])
    together = marker.spans(*marker.endpoints(words), first, length, slice(0, 6))
    torch.testing.assert_close(together[:4], marker(words[:4]), rtol=0, atol=1e-6)
    torch.testing.assert_close(together[4:], marker(words[4:]), rtol=0, atol=1e-6)
    assert torch.equal(together[5, 1], together[4, 0])


@pytest.mark.parametrize("pooling", ["first", "last", "mean", "max"])
def test_subtoken_pooling(pooling):
    tokens = torch.arange(30.0).view(10, 3)
    plan = StepPlan.build([10], [np.array([0])], [WordLayout(4, (1, 3, 0))], pooling)
    words = head(subtoken_pooling=pooling).word_vectors(
        tokens, plan, plan.device_index(tokens.device)
    )
    expected = {
        "first": [tokens[4], tokens[5], torch.zeros(3)],
        "last": [tokens[4], tokens[7], torch.zeros(3)],
        "mean": [tokens[4], tokens[5:8].mean(0), torch.zeros(3)],
        "max": [tokens[4], tokens[5:8].amax(0), torch.zeros(3)],
    }[pooling]
    assert torch.equal(words, torch.stack(expected))


def prompt(num_labels: int, counts: tuple[int, ...], seed: int) -> tuple[torch.Tensor, dict]:
    """Token ids ``[CLS] (<<ENT>> label)* <<SEP>> words... [SEP]`` and the request data."""
    ids = [1]
    for i in range(num_labels):
        ids += [ENT, 60 + i]
    ids.append(51)
    first = len(ids)
    gen = torch.Generator().manual_seed(seed)
    ids += torch.randint(100, 200, (sum(counts),), generator=gen).tolist() + [2]
    ids_t = torch.tensor(ids)
    return ids_t, {LAYOUT_KEY: {prompt_key(ids_t): WordLayout(first, counts).to_wire()}}


def scored_as_alone(
    model: GLiNERSpanHead,
    shapes: list[tuple[int, tuple[int, ...]]],
    dummy_at: int,
    shape: Callable[[int, int], tuple[int, ...]],
) -> tuple[list[tuple[torch.Tensor, dict]], list[torch.Tensor], list[torch.Tensor]]:
    """The :func:`prompt` of each of ``shapes`` (labels, word counts) and an unscored all-zero
    dummy at ``dummy_at``, scored in one step by ``model``: asserts that each result equals its
    prompt scored alone and is ``shape(labels, words)`` (the dummy's ``shape(0, 0)``); returns
    (prompts, hidden states, results), the last two in the step's order."""
    prompts = [prompt(labels, counts, seed) for seed, (labels, counts) in enumerate(shapes)]
    requests = [PoolerRequest(token_ids=ids, extra=extra) for ids, extra in prompts]
    dummy = PoolerRequest(token_ids=torch.zeros(5, dtype=torch.long), extra={})
    requests.insert(dummy_at, dummy)
    torch.manual_seed(1)
    hidden = [torch.randn(len(r.token_ids), 12) for r in requests]
    together = model(hidden, requests)
    assert together[dummy_at].shape == shape(0, 0)
    scored = [i for i in range(len(requests)) if i != dummy_at]
    for i, (labels, counts) in zip(scored, shapes, strict=True):
        (alone,) = model([hidden[i]], [requests[i]])
        assert together[i].shape == alone.shape == shape(labels, len(counts))
        torch.testing.assert_close(together[i], alone, rtol=0, atol=1e-6)
    return prompts, hidden, together


@pytest.mark.parametrize(
    "changes",
    [{}, {"subtoken_pooling": "mean"}, {"subtoken_pooling": "max"}, {"num_rnn_layers": 2},
     {"num_rnn_layers": 0, "embed_ent_token": False}],
)  # fmt: skip
def test_a_batched_step_scores_every_prompt_as_it_alone(changes):
    """Prompts of different word counts (some with truncated words) and label counts, with an
    unscored dummy prompt among them, scored together: each result equals that prompt scored
    alone, in the step's order."""
    shapes = [
        (2, (1, 2, 1)),
        (3, (2, 1, 1, 3, 0, 1, 1)),
        (1, (1,)),
        (2, (1, 0, 2, 1, 1)),
    ]
    scored_as_alone(head(**changes), shapes, 2, lambda labels, words: (words, 3, labels))


def test_prompts_without_a_usable_layout_get_empty_scores_never_an_error():
    """vLLM's start-up dummy runs: all-zero ids, no extra data, and (for the last dummy
    request) more hidden states than ids. A layout that runs past its prompt is refused too.
    Each gets a well-formed [0, max_width, labels] tensor; the scored prompt beside them is
    unaffected."""
    model = head()
    ids = torch.tensor([1, ENT, 7, ENT, 8, 51, 20, 21, 22, 23, 2])
    good = {LAYOUT_KEY: {prompt_key(ids): WordLayout(6, (1, 2, 1)).to_wire()}}
    past = {LAYOUT_KEY: {prompt_key(ids): WordLayout(9, (1, 2, 1)).to_wire()}}
    requests = [
        PoolerRequest(token_ids=torch.zeros(4, dtype=torch.long), extra={}),
        PoolerRequest(token_ids=ids, extra={}),
        PoolerRequest(token_ids=ids, extra=past),
        PoolerRequest(token_ids=ids, extra=good),
    ]
    hidden = [torch.randn(6, 12), *(torch.randn(len(ids), 12) for _ in range(3))]
    dummy, absent, mismatched, scored = model(hidden, requests)
    assert dummy.shape == (0, 3, 0)
    assert absent.shape == mismatched.shape == (0, 3, 2)
    assert scored.shape == (3, 3, 2) and bool(((scored > 0) & (scored < 1)).all())


def test_unscored_text_is_an_error_for_its_request():
    """A text whose prompt reached the engine changed (a top-level truncate_prompt_tokens):
    a client error (the IOProcessor answers 400 naming the text), never a raise in the engine."""
    assert checked_scores(torch.zeros(2, 3, 1), 2, 0).shape == (2, 3, 1)
    with pytest.raises(UnscoredText, match=r"scored 0 of the text's 5 words.*truncate_prompt"):
        checked_scores(torch.zeros(0, 3, 1), 5, 1)
    assert issubclass(UnscoredText, ValueError)


def test_load_weights_requires_every_parameter():
    model = head()
    names = dict(model.named_parameters())
    assert "token_rep_layer.projection.weight" in names and "rnn.lstm.weight_ih_l0" in names
    with pytest.raises(KeyError, match="missing"):
        model.load_weights([("prompt_rep_layer.0.weight", names["prompt_rep_layer.0.weight"])])
    with pytest.raises(KeyError, match="unexpected"):
        model.load_weights([("nope", torch.zeros(1))])
    assert model.load_weights(list(names.items())) == set(names)


def test_no_projection_no_lstm():
    model = head(encoder_hidden_size=8, num_rnn_layers=0)
    names = {n for n, _ in model.named_parameters()}
    assert not any(n.startswith(("token_rep_layer", "rnn")) for n in names)


BASE = {"encoder_config": {"hidden_size": 12, "model_type": "modernbert"}, "hidden_size": 8,
        "max_width": 3, "class_token_index": 50}  # fmt: skip


def test_parse_settings_defaults_and_refusals():
    settings = parse_settings(BASE)
    assert settings.span_mode == "markerV0" and settings.has_projection
    for bad, match in [
        ({"span_mode": "markerV1"}, "span_mode"),
        ({"span_mode": "token_level", "represent_spans": True}, "represent_spans"),
        ({"model_type": "gliner_bi_encoder_token"}, "token-level bi-encoder"),
        ({"labels_encoder": "bert"}, "bi-encoder"),  # no labels_encoder_config
        ({"relations_layer": "x"}, "relation"),
        ({"post_fusion_schema": "l2l"}, "post-fusion"),
        ({"subtoken_pooling": "sum"}, "subtoken_pooling"),
        ({"words_splitter_type": "spacy"}, "words_splitter_type"),
        ({"class_token_index": -1}, "class_token_index"),
        ({"encoder_config": None}, "encoder_config"),
    ]:
        with pytest.raises(UnsupportedGLiNERConfig, match=match):
            parse_settings({**BASE, **bad})


def test_span_chunks_change_nothing(monkeypatch):
    """Span vectors made a few words at a time score exactly as made all at once."""
    import vllm_factory.heads.gliner.head as head_module

    model = head()
    prompts = [prompt(2, (1, 2, 1, 1, 1), 0), prompt(3, (2, 1, 1), 1)]
    requests = [PoolerRequest(token_ids=ids, extra=extra) for ids, extra in prompts]
    hidden = [torch.randn(len(r.token_ids), 12) for r in requests]
    whole = model(hidden, requests)
    monkeypatch.setitem(head_module.SPAN_CHUNK, "cpu", 3 * 4 * 8 * 2)  # two words per chunk
    for a, b in zip(whole, model(hidden, requests)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("labels", [(2, 3), (3, 3)])  # different / equal label counts
def test_span_chunks_change_nothing_whatever_the_label_counts(monkeypatch, labels):
    import vllm_factory.heads.gliner.head as head_module

    model = head()
    prompts = [prompt(labels[0], (1, 2, 1, 1, 1), 0), prompt(labels[1], (2, 1, 1), 1)]
    requests = [PoolerRequest(token_ids=ids, extra=extra) for ids, extra in prompts]
    hidden = [torch.randn(len(r.token_ids), 12) for r in requests]
    whole = model(hidden, requests)
    assert [tuple(s.shape) for s in whole] == [(5, 3, labels[0]), (3, 3, labels[1])]
    assert all(s.is_contiguous() for s in whole)
    monkeypatch.setitem(head_module.SPAN_CHUNK, "cpu", 3 * 4 * 8 * 3)  # three words per chunk
    for a, b in zip(whole, model(hidden, requests)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("equal", [True, False])  # one label count / counts that differ
def test_a_steps_span_products_stay_within_the_budget_whatever_its_labels(monkeypatch, equal):
    """Many prompts with many labels in one step (labels past the fold, so spans are dotted
    with the label vectors): no span x label product is larger than ``SPAN_CHUNK``, because
    each chunk of prompts meets only its own labels (before, every chunk met all the step's
    labels, so a step's memory grew with its words times its labels); and the scores are
    those of one chunk."""
    import vllm_factory.heads.gliner.head as head_module

    model = head()
    prompts = [prompt(20 if equal else 20 + i % 2, (1, 2, 1, 1), i) for i in range(6)]
    requests = [PoolerRequest(token_ids=ids, extra=extra) for ids, extra in prompts]
    hidden = [torch.randn(len(r.token_ids), 12) for r in requests]
    whole = model(hidden, requests)
    marker = model.span_rep_layer.span_rep_layer
    inner = marker.out_project[0].out_features
    budget = 5 * marker.max_width * inner  # one prompt (4 words) per chunk
    assert not head_module.fold_labels(sum(s.shape[-1] for s in whole), inner // 4)
    monkeypatch.setitem(head_module.SPAN_CHUNK, "cpu", budget)
    sizes = []
    real = torch.Tensor.__matmul__

    def spy(a, b):
        out = real(a, b)
        sizes.append(out.numel())
        return out

    monkeypatch.setattr(torch.Tensor, "__matmul__", spy)
    chunked = model(hidden, requests)
    monkeypatch.setattr(torch.Tensor, "__matmul__", real)
    assert sizes and max(sizes) <= budget
    assert max(sizes) == 4 * marker.max_width * (20 if equal else 21)
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_folded_last_layer_scores_as_the_span_vectors_do(monkeypatch):
    """The span MLP's last layer folded into the label vectors gives the scores of span
    vectors dotted with the labels (gliner's order), up to float rounding; and so does each
    prompt scored in a step of its own."""
    import vllm_factory.heads.gliner.head as head_module

    model = head()
    prompts = [prompt(3, (1, 2, 1, 1, 1), 0), prompt(3, (2, 1, 1), 1)]
    requests = [PoolerRequest(token_ids=ids, extra=extra) for ids, extra in prompts]
    hidden = [torch.randn(len(r.token_ids), 12, dtype=torch.float64) for r in requests]
    model = model.double()
    monkeypatch.setattr(head_module, "fold_labels", lambda labels, width: True)
    folded = model(hidden, requests)
    monkeypatch.setattr(head_module, "fold_labels", lambda labels, width: False)
    unfolded = model(hidden, requests)
    alone = [model([h], [r])[0] for h, r in zip(hidden, requests)]
    for a, b, c in zip(folded, unfolded, alone):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
        torch.testing.assert_close(a, c, rtol=0, atol=1e-12)


def test_span_table_sums_to_the_joined_first_layer():
    """Start row + end row of the span table == the first layer on the joined vector."""
    marker = head().span_rep_layer.span_rep_layer.double()
    starts, ends = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    table = marker.span_table(starts, ends)
    joined = torch.cat((starts[1], ends[3])).relu()
    torch.testing.assert_close(table[1] + table[5 + 3], marker.out_project[0](joined))


@pytest.mark.parametrize(
    ("named", "expected"),
    [(None, torch.bfloat16), ("float32", torch.float32), ("model", torch.bfloat16)],
)
def test_head_runs_in_the_model_dtype_unless_the_config_names_one(named, expected):
    """vLLM keeps pooling heads in float32 by default (``ModelConfig.head_dtype``); the GLiNER
    head follows ``--dtype`` unless ``--hf-overrides`` names a ``head_dtype``."""
    import types

    from vllm_factory.heads.gliner.model import head_dtype

    hf_config = (
        types.SimpleNamespace() if named is None else types.SimpleNamespace(head_dtype=named)
    )
    resolved = {None: torch.float32, "float32": torch.float32, "model": torch.bfloat16}[named]
    model_config = types.SimpleNamespace(
        hf_config=hf_config, dtype=torch.bfloat16, head_dtype=resolved
    )
    assert head_dtype(model_config) == expected


def test_span_kernel_is_the_default_and_changes_no_score_on_the_cpu(monkeypatch):
    """By default the folded span scoring goes to ``span_logits`` with ``backend="auto"``
    (Triton on a GPU; its kernel is checked against the fallback in the kernels' interpreter
    suite); on the CPU that is the same fallback, once per prompt. ``VLLM_FACTORY_GLINER_SPAN_KERNEL=0`` keeps
    ``embedding_bag`` and ``addmm``."""
    import vllm_factory.heads.gliner.head as head_module

    model = head()
    prompts = [prompt(2, (1, 2, 1, 1, 1), 0), prompt(3, (2, 1, 1), 1)]
    requests = [PoolerRequest(token_ids=ids, extra=extra) for ids, extra in prompts]
    hidden = [torch.randn(len(r.token_ids), 12) for r in requests]
    monkeypatch.setenv(span_graphs.SPAN_KERNEL_ENV, "0")
    assert span_graphs.span_kernel_backend() == "torch"
    default = model(hidden, requests)
    calls = []
    real = head_module.span_logits

    def spy(table, rows, weight, bias=None, *, backend):
        calls.append(backend)
        return real(table, rows, weight, bias, backend=backend)

    monkeypatch.setattr(head_module, "span_logits", spy)
    monkeypatch.delenv(span_graphs.SPAN_KERNEL_ENV)
    assert span_graphs.span_kernel_backend() == "auto"
    for a, b in zip(default, model(hidden, requests)):
        assert torch.equal(a, b)
    assert calls == ["auto"] * len(prompts)  # on the CPU each prompt is a chunk of its own


def test_lstm_two_streams_are_opt_in(monkeypatch):

    monkeypatch.delenv(word_lstm.LSTM_TWO_STREAMS_ENV, raising=False)
    assert not word_lstm.lstm_two_streams_wanted()
    monkeypatch.setenv(word_lstm.LSTM_TWO_STREAMS_ENV, "1")
    assert word_lstm.lstm_two_streams_wanted()
    monkeypatch.setenv(word_lstm.LSTM_TWO_STREAMS_ENV, "0")
    assert not word_lstm.lstm_two_streams_wanted()


def test_row_buckets_sizes():
    """Rounded up to 1/32 of the power of two (at least 16): a few percent more rows, few
    distinct sizes; zero stays zero; off means unchanged."""
    from vllm_factory.heads.gliner.span_graphs import RowBuckets

    on = RowBuckets(True)
    sizes = {on.size(n) for n in range(1, 8193)}
    assert len(sizes) < 150
    for n in range(1, 8193):
        size = on.size(n)
        assert size >= n and size % 16 == 0
        assert n < 256 or size <= n * 1.0625  # below 256 the grain is 16 rows
    assert on.size(0) == 0 and on.size(5000) == 5120
    assert RowBuckets(False).size(5000) == 5000
    padded = on.rows(torch.arange(6).view(3, 2))
    assert (
        padded.shape == (16, 2)
        and padded[3:].eq(0).all()
        and padded[:3].eq(torch.arange(6).view(3, 2)).all()
    )


def test_row_buckets_are_for_gpus_unless_the_switch_says(monkeypatch):

    monkeypatch.delenv(span_graphs.ROW_BUCKETS_ENV, raising=False)
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert not span_graphs.RowBuckets.for_device(cpu).active
    assert span_graphs.RowBuckets.for_device(gpu).active
    monkeypatch.setenv(span_graphs.ROW_BUCKETS_ENV, "0")
    assert not span_graphs.RowBuckets.for_device(gpu).active
    monkeypatch.setenv(span_graphs.ROW_BUCKETS_ENV, "1")
    assert span_graphs.RowBuckets.for_device(cpu).active


@pytest.mark.parametrize("labels", [(2, 3), (3, 3), (40, 40)])  # different / equal / unfolded
@pytest.mark.parametrize("projection", [False, True])
def test_row_buckets_change_no_score(monkeypatch, labels, projection):
    """The GPU's padded products (words, labels, span rows and tokens rounded up with zero
    rows), run on the CPU: every prompt's scores as without padding, whether the labels are
    folded or not, in one chunk or several."""
    import vllm_factory.heads.gliner.head as head_module

    changes = {"encoder_hidden_size": 12 if projection else 8}
    model = head(**changes).double()
    width = changes["encoder_hidden_size"]
    prompts = [prompt(labels[0], (1, 2, 1, 1, 1), 0), prompt(labels[1], (2, 1, 1), 1)]
    requests = [PoolerRequest(token_ids=ids, extra=extra) for ids, extra in prompts]
    hidden = [torch.randn(len(r.token_ids), width, dtype=torch.float64) for r in requests]
    monkeypatch.setenv(span_graphs.ROW_BUCKETS_ENV, "0")
    plain = model(hidden, requests)
    calls = []
    real = span_graphs.RowBuckets.rows

    def spy(self, tensor):
        out = real(self, tensor)
        calls.append(out.shape[0] > tensor.shape[0])
        return out

    monkeypatch.setattr(span_graphs.RowBuckets, "rows", spy)
    monkeypatch.setenv(span_graphs.ROW_BUCKETS_ENV, "1")
    for chunk in (head_module.SPAN_CHUNK["cpu"], 3 * 4 * 8 * 2):  # one chunk; two words each
        monkeypatch.setitem(head_module.SPAN_CHUNK, "cpu", chunk)
        for a, b in zip(plain, model(hidden, requests)):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert any(calls)  # something was padded


@pytest.mark.parametrize("labels", [(2, 2), (3, 3)])
@pytest.mark.parametrize("pooling", ["first", "mean"])
def test_span_graphs_fixed_shape_path_changes_no_score(monkeypatch, labels, pooling):
    """The span graphs' body (on the CPU with ``VLLM_FACTORY_GLINER_SPAN_GRAPHS=1``) run on
    its static buffers: steps of one bucket with fewer and more words one after the other
    (stale rows past a step's words), a second bucket, and steps it does not take (label counts
    that differ between prompts) all score as the eager head."""

    model = head(subtoken_pooling=pooling).double()
    steps = [
        [prompt(labels[0], (1, 2, 1, 1, 1), 0), prompt(labels[1], (2, 1, 1), 1)],
        [prompt(labels[0], (1, 1), 2)],  # fewer words: the same bucket, stale rows after them
        [prompt(labels[0], (1, 2, 1, 1, 1, 1, 1, 3), 3), prompt(labels[1], (2, 1, 1, 1), 4)],
        [prompt(labels[0], (1,) * 20, 5)],  # another bucket
        [prompt(2, (1, 2, 1), 6), prompt(4, (1, 1), 7)],  # label counts differ: eager
    ]
    monkeypatch.setenv(span_graphs.ROW_BUCKETS_ENV, "1")
    built = []
    real = span_graphs.SpanGraphs._recipe

    def spy(self, *args):
        built.append(args[1:4])
        return real(self, *args)

    monkeypatch.setattr(span_graphs.SpanGraphs, "_recipe", spy)
    for prompts in steps:
        requests = [PoolerRequest(token_ids=ids, extra=extra) for ids, extra in prompts]
        hidden = [torch.randn(len(r.token_ids), 12, dtype=torch.float64) for r in requests]
        monkeypatch.setenv(span_graphs.SPAN_GRAPHS_ENV, "0")
        eager = model(hidden, requests)
        monkeypatch.setenv(span_graphs.SPAN_GRAPHS_ENV, "1")
        for a, b in zip(eager, model(hidden, requests)):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    # one build per bucket (word rows, label rows, labels a prompt), none for the last step
    assert len(built) == len(set(built)) == 2
    assert all(rows >= 16 for rows, _, _ in built)


def test_span_graphs_are_the_gpu_default_and_never_on_an_eager_server(monkeypatch):

    words = torch.zeros(3, 8)
    gpu, cpu = torch.device("cuda", 0), torch.device("cpu")
    monkeypatch.delenv(span_graphs.SPAN_GRAPHS_ENV, raising=False)
    assert span_graphs.span_graphs_wanted(gpu) and not span_graphs.span_graphs_wanted(cpu)
    assert not span_graphs.SpanGraphs(True).takes(words)
    monkeypatch.setenv(span_graphs.SPAN_GRAPHS_ENV, "0")
    assert not span_graphs.span_graphs_wanted(gpu) and not span_graphs.span_graphs_wanted(cpu)
    monkeypatch.setenv(span_graphs.SPAN_GRAPHS_ENV, "1")
    assert span_graphs.span_graphs_wanted(gpu) and span_graphs.span_graphs_wanted(cpu)
    assert span_graphs.SpanGraphs(True).takes(words)
    assert head(cuda_graphs=False).span_graphs.cuda_graphs is False
    graphs = span_graphs.SpanGraphs(True, limit=0)  # past the limit: the eager head scores
    assert graphs.scores(head(), words, torch.zeros(2, 8), *(torch.zeros(3, dtype=torch.long),) * 2,
                         torch.zeros(3, 1, dtype=torch.long)) is None  # fmt: skip
