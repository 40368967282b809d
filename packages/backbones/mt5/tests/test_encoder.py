"""The packed encoder against Hugging Face's (M)T5EncoderModel on tiny random checkpoints."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import MT5Config, MT5EncoderModel, T5Config, T5EncoderModel
from transformers.models.t5.modeling_t5 import T5Attention
from vllm_factory.backbones.mt5 import MT5Encoder, relative_position_bucket
from vllm_factory.testing.vllm_context import finish_loading

# Names behind a wrapper's prefix (here GLiNER's), passed to ``load_weights``.
WRAPPED = "token_rep_layer.bert_layer.model."
# Several beyond max_distance (16), equal lengths adjacent (40, 40) and apart (17, 17).
LENGTHS = [5, 40, 40, 17, 70, 1, 17, 23]


@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (8, 16), (16, 20)])
def test_bucket_matches_hugging_face(num_buckets, max_distance):
    relative = torch.arange(-600, 601)[None, :]
    expected = T5Attention._relative_position_bucket(
        relative, bidirectional=True, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(relative_position_bucket(relative, num_buckets, max_distance), expected)


def tiny_checkpoint(tmp_path, mt5: bool, d_kv: int):
    """A random (M)T5 encoder saved in its real layout; inner dim heads * d_kv != d_model."""
    torch.manual_seed(0)
    config_cls, model_cls = (MT5Config, MT5EncoderModel) if mt5 else (T5Config, T5EncoderModel)
    config = config_cls(
        vocab_size=300,
        d_model=96,
        d_kv=d_kv,
        d_ff=80,
        num_layers=3,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        feed_forward_proj="gated-gelu" if mt5 else "relu",
        dropout_rate=0.0,
    )
    model = model_cls(config).eval()
    with torch.no_grad():  # random init leaves the bias table tiny; make it matter
        bias = model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias
        bias.weight.normal_(0.0, 1.0)
    model.save_pretrained(tmp_path)
    return config, model, load_file(tmp_path / "model.safetensors")


def build_encoder(config, weights, prefixes, dtype=torch.float32, vllm_config=None):
    """Construct, load and post-process as vLLM's loader does (CPU gemm setup included);
    under the ``vllm_context`` fixture."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # vLLM builds parameters in the model dtype
    try:
        encoder = MT5Encoder(config, vllm_config=vllm_config, prefix="model").eval()
    finally:
        torch.set_default_dtype(default)
    loaded = encoder.load_weights(weights, prefixes=prefixes)
    finish_loading(encoder)
    return encoder, loaded


def hf_outputs(model, ids: torch.Tensor) -> torch.Tensor:
    """Each sequence alone (no padding), concatenated: the packed reference."""
    outs, start = [], 0
    with torch.no_grad():
        for length in LENGTHS:
            piece = ids[start : start + length][None]
            outs.append(model(input_ids=piece).last_hidden_state[0])
            start += length
    return torch.cat(outs)


@pytest.mark.parametrize(("mt5", "d_kv"), [(True, 32), (True, 64), (False, 32)])
@pytest.mark.parametrize("min_fill", [1.0, 0.3])  # exact-length groups; padded groups
@pytest.mark.parametrize("prefix", ["", WRAPPED])
def test_encoder_matches_hugging_face(vllm_context, tmp_path, mt5, d_kv, min_fill, prefix):
    config, model, state = tiny_checkpoint(tmp_path, mt5, d_kv)
    ids = torch.randint(0, config.vocab_size, (sum(LENGTHS),))
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    expected = hf_outputs(model, ids)

    weights = [(prefix + name, tensor) for name, tensor in state.items()]
    # what a GLiNER checkpoint holds besides its text encoder must be skipped
    weights += [
        ("token_rep_layer.labels_encoder.model.shared.weight", torch.zeros(3, 3)),
        ("span_rep_layer.out_project.weight", torch.zeros(3, 3)),
    ]
    encoder, loaded = build_encoder(config, weights, (prefix,))
    encoder.min_fill = min_fill
    assert loaded == {name for name, _ in encoder.named_parameters()}

    with torch.no_grad():
        out = encoder(ids, positions)
    assert out.shape == (sum(LENGTHS), config.d_model)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)


def test_bf16_runs_close_to_fp32(vllm_context, tmp_path):
    """We serve bf16 too: the vLLM norm ops and SDPA take it, and stay near fp32."""
    config, model, state = tiny_checkpoint(tmp_path, True, 32)
    ids = torch.randint(0, config.vocab_size, (sum(LENGTHS),))
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    expected = hf_outputs(model, ids)
    encoder, _ = build_encoder(config, state.items(), ("",), torch.bfloat16)
    with torch.no_grad():
        out = encoder(ids, positions).float()
    cosine = torch.nn.functional.cosine_similarity(out, expected, dim=-1)
    assert cosine.min() > 0.99


def test_attention_splits_the_compiled_graph(vllm_context, tmp_path):
    """vLLM must split its compiled graph at our attention op (it reads the layout on the
    host), and the op writes into the caller's buffer and returns nothing: under piecewise
    CUDA graphs the next graph piece reads the addresses it saw at capture."""
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig
    from vllm_factory.backbones.mt5.encoder import ATTENTION_OP

    config, _, _ = tiny_checkpoint(tmp_path, True, 32)
    vllm_config = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
    vllm_config.compilation_config.splitting_ops = ["vllm::unified_attention"]
    MT5Encoder(config, vllm_config=vllm_config)
    assert vllm_config.compilation_config.splitting_ops == ["vllm::unified_attention", ATTENTION_OP]
    schema = torch.ops.vllm_factory.t5_attention.default._schema
    assert not schema.returns
    assert [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write] == ["out"]


@pytest.mark.parametrize("mt5", [True, False])  # gated (wi_0 / wi_1) and plain feed-forward
def test_linear_layers_take_the_engines_quantization(vllm_context, tmp_path, mt5):
    """``--quantization``: every vLLM linear layer is built with the engine's quantization
    config, under its own name."""
    from vllm_factory.testing.vllm_context import linears_asking_quantization

    config, _, _ = tiny_checkpoint(tmp_path, mt5, 32)
    asked, linears = linears_asking_quantization(
        lambda engine: MT5Encoder(config, vllm_config=engine, prefix="model")
    )
    assert asked == linears
    assert len(linears) == config.num_layers * 4  # qkv, o, wi, wo


@pytest.mark.parametrize("path", ["split", "in_graph"])
def test_cuda_graph_padding_leaves_real_sequences_alone(vllm_context, tmp_path, request, path):
    """vLLM pads a batch to a captured size with tokens at position 0 (each a sequence of its
    own); a dummy run may hold stale positions before the first start. Real sequences come
    out as without either, and nothing is left uninitialised, on both attention paths."""
    config, _, state = tiny_checkpoint(tmp_path, True, 32)
    vllm_config = request.getfixturevalue("in_graph") if path == "in_graph" else None
    encoder, _ = build_encoder(config, state.items(), ("",), vllm_config=vllm_config)
    encoder.min_fill = 0.3
    ids = torch.randint(0, config.vocab_size, (sum(LENGTHS),))
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    stale, tail = torch.arange(5, 9), torch.zeros(13, dtype=torch.long)
    with torch.no_grad():
        plain = encoder(ids, positions)
        padded = encoder(
            torch.cat([torch.full((4,), 3), ids, torch.zeros(13, dtype=torch.long)]),
            torch.cat([stale, positions, tail]),
        )
        nothing = encoder(torch.full((6,), 3), torch.arange(2, 8))
    torch.testing.assert_close(padded[4 : 4 + len(ids)], plain, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(padded).all() and torch.isfinite(nothing).all()


@pytest.fixture
def in_graph(monkeypatch):
    """The in-graph attention (CUDA's default, ``VLLM_FACTORY_MT5_IN_GRAPH_ATTENTION``) taken
    on CPU: the same encoder code path, with ``attention_by_rows``' PyTorch fallback in
    place of its Triton kernel (which the kernels' interpreter and CUDA suites run)."""
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig
    from vllm_factory.backbones.mt5 import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "in_graph_attention_usable", lambda cfg: True)
    config = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
    config.model_config = SimpleNamespace(max_model_len=128)  # all the encoder reads of it
    return config


@pytest.mark.parametrize(("mt5", "d_kv"), [(True, 32), (False, 64)])
def test_in_graph_attention_matches_hugging_face(vllm_context, tmp_path, in_graph, mt5, d_kv):
    """Sequences longer than max_distance (16) reach the clamped distances of the bias."""
    config, model, state = tiny_checkpoint(tmp_path, mt5, d_kv)
    ids = torch.randint(0, config.vocab_size, (sum(LENGTHS),))
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    expected = hf_outputs(model, ids)
    encoder, _ = build_encoder(config, state.items(), ("",), vllm_config=in_graph)
    assert encoder.rows_max_seqlen == 128
    assert encoder.bias_index.numel() == 2 * 16 + 1
    with torch.no_grad():
        out = encoder(ids, positions)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)


def test_in_graph_attention_keeps_the_graph_whole(vllm_context, tmp_path, monkeypatch):
    """In graph, the attention is no split point, and the choice keys vLLM's compile cache
    (a server with the other choice must not load this one's cached graph)."""
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig
    from vllm_factory.backbones.mt5 import encoder as encoder_module

    config, _, _ = tiny_checkpoint(tmp_path, True, 32)
    keys = {}
    for opted_in in (False, True):
        monkeypatch.setattr(encoder_module, "in_graph_attention_usable", lambda c, on=opted_in: on)
        vllm_config = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
        vllm_config.compilation_config.splitting_ops = []
        vllm_config.model_config = SimpleNamespace(max_model_len=64)
        MT5Encoder(config, vllm_config=vllm_config)
        vllm_config.model_config = None
        split = vllm_config.compilation_config.splitting_ops
        assert split == ([] if opted_in else [encoder_module.ATTENTION_OP])
        assert vllm_config.additional_config["vllm_factory"]["mt5_attention"] == (
            "rows" if opted_in else "split"
        )
        vllm_config.compilation_config.splitting_ops = []
        keys[opted_in] = vllm_config.compute_hash()
    assert keys[False] != keys[True]


def test_in_graph_forward_traces_as_one_graph(vllm_context, tmp_path, in_graph):
    """What the in-graph attention is for: dynamo traces the whole forward (row bounds, bias table, every
    layer's attention op) without a graph break, with dynamic token counts, as vLLM compiles
    it; the traced function gives the eager outputs."""
    config, _, state = tiny_checkpoint(tmp_path, True, 32)
    encoder, _ = build_encoder(config, state.items(), ("",), vllm_config=in_graph)
    traced = torch.compile(
        lambda ids, positions: MT5Encoder.forward(encoder, ids, positions),
        fullgraph=True, dynamic=True, backend="eager",
    )  # fmt: skip
    ids = torch.randint(0, config.vocab_size, (sum(LENGTHS),))
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    with torch.no_grad():
        torch.testing.assert_close(traced(ids, positions), encoder(ids, positions))
        short = traced(ids[:30], positions[:30])  # another token count, same graph
    assert short.shape == (30, config.d_model)


def test_in_graph_attention_is_the_cuda_default_and_can_be_turned_off(monkeypatch):
    from vllm_factory.backbones.mt5 import encoder as encoder_module
    from vllm_factory.testing.vllm_context import IN_GRAPH_BY_DEFAULT, in_graph_choices

    choices = in_graph_choices(
        encoder_module.in_graph_attention_usable, encoder_module.IN_GRAPH_ATTENTION_ENV, monkeypatch
    )
    assert choices == IN_GRAPH_BY_DEFAULT
