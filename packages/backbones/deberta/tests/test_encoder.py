"""The packed DeBERTa encoder vs Hugging Face's DebertaV2Model (tiny random configs, fp32)."""

from __future__ import annotations

import pytest
import torch
from conftest import finish_loading

transformers = pytest.importorskip("transformers")

LENGTHS = [5, 37, 70, 1, 16]  # packed batch; 70 > 2 * the 8 buckets and > max_relative 32

BASE = {
    "vocab_size": 300, "hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 96,
    "num_hidden_layers": 2, "max_position_embeddings": 128, "layer_norm_eps": 1e-7,
    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
}  # fmt: skip
# DeBERTa-v3 layout (what GLiNER uses): no absolute positions, shared keys, LN'd rel. emb.
V3 = {
    "relative_attention": True,
    "position_buckets": 8,
    "max_relative_positions": 32,
    "pos_att_type": "p2c|c2p",
    "share_att_key": True,
    "norm_rel_ebd": "layer_norm",
    "position_biased_input": False,
    "type_vocab_size": 0,
}
CONFIGS = {
    "v3": V3,
    # DeBERTa-v2-xlarge layout: the conv layer beside layer 0, head_dim 64.
    "v2_conv": {
        **V3,
        "conv_kernel_size": 3,
        "conv_act": "gelu",
        "num_attention_heads": 1,
    },
    # Separate position projections, absolute positions, token types, a factorised embedding,
    # no bucketing, tanh GELU.
    "v2_separate": {
        "relative_attention": True,
        "position_buckets": -1,
        "max_relative_positions": 16,
        "pos_att_type": "c2p|p2c",
        "share_att_key": False,
        "norm_rel_ebd": "none",
        "position_biased_input": True,
        "type_vocab_size": 2,
        "embedding_size": 32,
        "hidden_act": "gelu_new",
    },
    # No relative attention (scale still counts pos_att_type, as in HF).
    "absolute_only": {
        "relative_attention": False,
        "pos_att_type": "p2c|c2p",
        "position_biased_input": True,
        "type_vocab_size": 0,
    },
}


def _hf_model(name: str):
    from transformers import DebertaV2Config, DebertaV2Model

    torch.manual_seed(0)
    config = DebertaV2Config(**{**BASE, **CONFIGS[name]})
    model = DebertaV2Model(config).eval()
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if "LayerNorm" in pname:
                param.uniform_(0.5, 1.5) if pname.endswith("weight") else param.normal_(0, 0.1)
            else:
                param.normal_(0.0, 0.15)
    return config, model


def _hf_packed(model, ids: list[torch.Tensor]) -> torch.Tensor:
    longest = max(len(x) for x in ids)
    padded = torch.zeros(len(ids), longest, dtype=torch.long)
    mask = torch.zeros(len(ids), longest, dtype=torch.long)
    for b, x in enumerate(ids):
        padded[b, : len(x)] = x
        mask[b, : len(x)] = 1
    with torch.no_grad():
        out = model(input_ids=padded, attention_mask=mask).last_hidden_state
    return out[mask.bool()]


def _loaded(name: str, seed: int, state=None):
    """The config, our encoder with ``name``'s HF weights (``state``: how the checkpoint names
    them, bare by default) and a packed batch of ``LENGTHS`` random ids."""
    from vllm_factory.backbones.deberta import DebertaV2Encoder

    config, hf = _hf_model(name)
    ours = DebertaV2Encoder(config).eval()
    loaded = ours.load_weights((state or hf.state_dict()).items())
    assert loaded == {n for n, _ in ours.named_parameters()}
    finish_loading(ours)
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(1, config.vocab_size, (n,), generator=g) for n in LENGTHS]
    return config, hf, ours, ids


@pytest.mark.parametrize("name", list(CONFIGS))
def test_encoder_matches_hf(vllm_context, name: str) -> None:
    _, hf = _hf_model(name)
    # The backbone as a task model (DebertaV2For*) stores it: under "deberta."
    state = {f"deberta.{k}": v for k, v in hf.state_dict().items()}
    _, hf, ours, ids = _loaded(name, 1, state)
    expected = _hf_packed(hf, ids)
    with torch.no_grad():
        out = ours(torch.cat(ids), torch.cat([torch.arange(n) for n in LENGTHS]))
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    # Each sequence alone gives the same rows: packing does not leak across sequences.
    first = ours(ids[1], torch.arange(LENGTHS[1]))
    torch.testing.assert_close(first, out[5 : 5 + 37], atol=1e-5, rtol=1e-5)


def test_callers_prefix_and_foreign_weights(vllm_context) -> None:
    """A model whose checkpoint nests the encoder (GLiNER's ``token_rep_layer.bert_layer.model.``)
    names its prefix; names under no prefix given, and other modules' names, are skipped."""
    from vllm_factory.backbones.deberta import DebertaV2Encoder

    config, hf = _hf_model("v3")
    ours = DebertaV2Encoder(config)
    weights = [(f"token_rep_layer.bert_layer.model.{k}", v) for k, v in hf.state_dict().items()]
    weights += [
        ("span_rep_layer.out_project.0.weight", torch.zeros(3, 3)),  # another module: skipped
        ("token_rep_layer.labels_encoder.model.embeddings.word_embeddings.weight", torch.zeros(3)),
    ]
    assert ours.load_weights(weights) == set()  # not a prefix the backbone knows
    loaded = ours.load_weights(weights, prefixes=("token_rep_layer.bert_layer.model.",))
    assert loaded == {n for n, _ in ours.named_parameters()}
    torch.testing.assert_close(
        ours.encoder.rel_embeddings.weight, hf.encoder.rel_embeddings.weight, atol=0, rtol=0
    )


@pytest.mark.parametrize("name", ["v3", "v2_separate", "absolute_only"])
def test_relative_rows_are_projected_once_at_load(vllm_context, name: str) -> None:
    """Loading projects each layer's relative rows through its query / key weights (the
    packed ``qkv_proj``'s slices, or the separate position projections); steps read them and
    answer as when the rows are projected in the step."""
    from vllm_factory.backbones.deberta.encoder import base_projection

    _, _, ours, ids = _loaded(name, 4)
    attention = [layer.attention.self for layer in ours.encoder.layer]
    relative = name != "absolute_only"
    assert all(a.rows_cached == relative for a in attention)
    rel = ours.encoder.rel_embedding()
    for a in attention if relative else ():
        query_rows, key_rows = a.relative_rows(rel, base_projection)
        torch.testing.assert_close(a.pos_query_rows, query_rows, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(a.pos_key_rows, key_rows, atol=1e-6, rtol=1e-6)
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    with torch.no_grad():
        cached = ours(torch.cat(ids), positions)
        for a in attention:
            a.rows_cached = False
        stepwise = ours(torch.cat(ids), positions)
    torch.testing.assert_close(cached, stepwise, atol=1e-5, rtol=1e-5)


def test_quantized_projections_keep_projecting_per_step(vllm_context) -> None:
    """A quantized projection's weights are final only after vLLM's loader processes them, so
    its layer projects the rows in each step."""
    from vllm_factory.backbones.deberta import DebertaV2Encoder

    config, hf = _hf_model("v3")
    ours = DebertaV2Encoder(config)
    ours.encoder.layer[0].attention.self.qkv_proj.quant_method = object()  # not vLLM's plain one
    ours.load_weights(hf.state_dict().items())
    assert [layer.attention.self.rows_cached for layer in ours.encoder.layer] == [False, True]


def test_rows_choice_keys_vllms_compile_cache(vllm_context) -> None:
    """Steps that read the loaded rows and steps that project them compile to different
    graphs; a start that never calls ``load_weights`` (vLLM's dummy weights) must not load the
    other's graph from vLLM's compile cache."""
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig
    from vllm_factory.backbones.deberta import DebertaV2Encoder

    config, hf = _hf_model("v3")
    keys = {}
    for load in (False, True):
        vllm_config = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
        ours = DebertaV2Encoder(config, vllm_config=vllm_config)
        if load:
            ours.load_weights(hf.state_dict().items())
            assert vllm_config.additional_config["vllm_factory"]["deberta_relative_rows"] == "load"
        vllm_config.compilation_config.splitting_ops = []  # only our settings tell them apart
        keys[load] = vllm_config.compute_hash()
    assert keys[False] != keys[True]


def test_unknown_activation_is_refused(vllm_context) -> None:
    from transformers import DebertaV2Config
    from vllm_factory.backbones.deberta import DebertaV2Encoder

    config = DebertaV2Config(**{**BASE, **CONFIGS["v3"], "hidden_act": "mish_v9"})
    with pytest.raises(ValueError, match="activation"):
        DebertaV2Encoder(config)


def test_linear_layers_take_the_engines_quantization(vllm_context) -> None:
    """``--quantization``: every vLLM linear layer (the separate position projections too)
    is built with the engine's quantization config, under its own name."""
    from vllm_factory.backbones.deberta import DebertaV2Encoder
    from vllm_factory.testing.vllm_context import linears_asking_quantization

    config, _ = _hf_model("v2_separate")
    asked, linears = linears_asking_quantization(
        lambda engine: DebertaV2Encoder(config, vllm_config=engine, prefix="model")
    )
    assert asked == linears
    assert len(linears) == config.num_hidden_layers * 6  # qkv, pos k, pos q, o, up, down


def test_layout_ops_split_the_compiled_graph(vllm_context) -> None:
    """vLLM must split its compiled graph at the ops that read the layout on the host:
    building the encoder adds them to vLLM's splitting ops."""
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig
    from vllm_factory.backbones.deberta import DebertaV2Encoder
    from vllm_factory.backbones.deberta.encoder import ATTENTION_OP, CONV_OP

    config, _ = _hf_model("v2_conv")
    vllm_config = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
    vllm_config.compilation_config.splitting_ops = ["vllm::unified_attention"]
    DebertaV2Encoder(config, vllm_config=vllm_config)
    assert vllm_config.compilation_config.splitting_ops == [
        "vllm::unified_attention",
        ATTENTION_OP,
        CONV_OP,
    ]


def _padded_run(ours, ids: list[torch.Tensor], tail: int, stale: int = 0) -> torch.Tensor:
    """The batch as vLLM hands it to a CUDA graph padded by ``tail`` tokens (position 0
    each); ``stale`` leading tokens with positions left over from an earlier step."""
    positions = [torch.arange(3, 3 + stale)] + [torch.arange(len(x)) for x in ids]
    tokens = [torch.full((stale,), 7)] + ids + [torch.zeros(tail, dtype=torch.long)]
    positions.append(torch.zeros(tail, dtype=torch.long))
    with torch.no_grad():
        return ours(torch.cat(tokens), torch.cat(positions))


@pytest.mark.parametrize("name", ["v3", "v2_conv"])
def test_cuda_graph_padding_leaves_real_sequences_alone(vllm_context, name: str) -> None:
    """vLLM pads a batch to a captured size with tokens at position 0: each is a sequence of
    its own and the real ones come out as without padding. A dummy run's stale positions
    before the first start yield zeros from the ops rather than raising in the engine."""
    _, _, ours, ids = _loaded(name, 2)
    plain = _padded_run(ours, ids, tail=0)
    padded = _padded_run(ours, ids, tail=11)
    torch.testing.assert_close(padded[: plain.shape[0]], plain, atol=1e-6, rtol=1e-6)
    stale = _padded_run(ours, ids, tail=3, stale=4)
    assert torch.isfinite(stale).all()
    torch.testing.assert_close(stale[4 : 4 + plain.shape[0]], plain, atol=1e-6, rtol=1e-6)
    # Nothing but stale positions (no sequence starts at all): finite, no error.
    with torch.no_grad():
        assert torch.isfinite(ours(torch.full((6,), 5), torch.arange(2, 8))).all()


@pytest.mark.parametrize("name", ["v3", "v2_separate", "absolute_only"])
def test_in_graph_attention_matches_the_split_point_op(vllm_context, name: str) -> None:
    """The attention a CUDA engine with Triton takes (``ROWS_OP``: sequence bounds from the
    positions on the device, no split point) gives the split-point op's rows, with graph
    padding and a dummy run's stale positions too (on the CPU its fallback runs; the Triton
    kernel is checked against Hugging Face in the kernels' interpreter suite)."""
    config, _, ours, ids = _loaded(name, 3)
    split = [_padded_run(ours, ids, tail=t, stale=s) for t, s in ((0, 0), (5, 4))]
    ours.encoder.use_rows_attention(config.max_position_embeddings)
    rows = [_padded_run(ours, ids, tail=t, stale=s) for t, s in ((0, 0), (5, 4))]
    torch.testing.assert_close(rows[0], split[0], atol=1e-6, rtol=1e-6)
    n = split[0].shape[0]
    torch.testing.assert_close(rows[1][4 : 4 + n], split[0], atol=1e-6, rtol=1e-6)
    assert torch.isfinite(rows[1]).all()


def test_in_graph_attention_is_the_cuda_default_unless_turned_off(monkeypatch) -> None:
    from vllm_factory.backbones.deberta import encoder
    from vllm_factory.testing.vllm_context import IN_GRAPH_BY_DEFAULT, in_graph_choices

    choices = in_graph_choices(
        encoder.rows_attention_usable, encoder.IN_GRAPH_ATTENTION_ENV, monkeypatch
    )
    assert choices == IN_GRAPH_BY_DEFAULT


def test_attention_choice_keys_vllms_compile_cache(vllm_context, monkeypatch) -> None:
    """vLLM finds its compiled graph by ``VllmConfig.compute_hash()``: an encoder that attends
    in graph and one that splits at its attention op must not share that key (on an H200 a
    server started with another attention than the last one loaded that one's graph)."""
    from types import SimpleNamespace

    from vllm.config import CompilationConfig, CompilationMode, VllmConfig
    from vllm_factory.backbones.deberta import DebertaV2Encoder
    from vllm_factory.backbones.deberta import encoder as encoder_module

    config, _ = _hf_model("v3")
    keys = {}
    for in_graph in (False, True):
        monkeypatch.setattr(encoder_module, "rows_attention_usable", lambda cfg, on=in_graph: on)
        vllm_config = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
        vllm_config.compilation_config.splitting_ops = []  # only our settings tell them apart
        vllm_config.model_config = SimpleNamespace(max_model_len=128)  # read when in graph
        DebertaV2Encoder(config, vllm_config=vllm_config)
        vllm_config.model_config = None
        attention = vllm_config.additional_config["vllm_factory"]["deberta_attention"]
        assert attention == ("rows" if in_graph else "split")
        vllm_config.compilation_config.splitting_ops = []
        keys[in_graph] = vllm_config.compute_hash()
    assert keys[False] != keys[True]
