"""The in-graph attention (CUDA's default, ``VLLM_FACTORY_MODERNBERT_IN_GRAPH_ATTENTION``) on CPU:
the same encoder code path as on a GPU (key ranges from the positions, per layer type, through
the registered op), with ``attention_by_rows``' PyTorch fallback in place of its Triton kernel
(which the kernels' interpreter suite runs), against transformers' ``ModernBertModel``."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
from vllm_factory.backbones.modernbert import encoder as encoder_module


def eager_vllm_config():
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig

    return VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))


def random_modernbert(monkeypatch, local_attention: int):
    from vllm_factory.testing.vllm_context import finish_loading

    config = transformers.ModernBertConfig(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
        num_attention_heads=2, global_attn_every_n_layers=3, local_attention=local_attention,
        max_position_embeddings=128, initializer_range=0.1, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, cls_token_id=1, sep_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    reference = transformers.ModernBertModel(config).eval()
    monkeypatch.setattr(encoder_module, "in_graph_attention_usable", lambda cfg: True)
    ours = encoder_module.ModernBertEncoder(config, vllm_config=eager_vllm_config()).eval()
    loaded = ours.load_weights(reference.state_dict().items())
    assert loaded == {name for name, _ in ours.named_parameters()}
    finish_loading(ours)
    return reference, ours


@pytest.mark.parametrize("local_attention", [8, 128])  # a band shorter / longer than inputs
def test_in_graph_attention_matches_transformers(vllm_context, monkeypatch, local_attention):
    reference, ours = random_modernbert(monkeypatch, local_attention)
    assert ours.rows_max_seqlen == 128 and not ours.vllm_attention
    assert all(layer.attn.attn is None for layer in ours.layers)  # no vLLM attention layer
    lengths = [5, 30, 1, 17, 2]
    ids = [torch.randint(3, 300, (n,)) for n in lengths]
    positions = torch.cat([torch.arange(n) for n in lengths])
    with torch.no_grad():
        got = ours(torch.cat(ids), positions)
        want = torch.cat([reference(input_ids=i[None]).last_hidden_state[0] for i in ids])
    torch.testing.assert_close(got, want, rtol=0, atol=3e-5)


def test_row_bounds_follow_each_layer_type(vllm_context, monkeypatch):
    _, ours = random_modernbert(monkeypatch, 8)
    positions = torch.tensor([0, 1, 2, 3, 4, 5, 6, 0, 1])
    bounds = ours.row_bounds(torch.full_like(positions, 9), positions).bounds
    start, end = bounds[encoder_module.GLOBAL]
    assert start.tolist() == [0] * 7 + [7, 7] and end.tolist() == [7] * 7 + [9, 9]
    start, end = bounds[encoder_module.LOCAL]  # |i - j| <= 4
    assert start.tolist() == [0, 0, 0, 0, 0, 1, 2, 7, 7]
    assert end.tolist() == [5, 6, 7, 7, 7, 7, 7, 9, 9]


def test_in_graph_attention_is_the_cuda_default_and_can_be_turned_off(monkeypatch):
    from vllm_factory.testing.vllm_context import IN_GRAPH_BY_DEFAULT, in_graph_choices

    choices = in_graph_choices(
        encoder_module.in_graph_attention_usable, encoder_module.IN_GRAPH_ATTENTION_ENV, monkeypatch
    )
    assert choices == IN_GRAPH_BY_DEFAULT


@pytest.mark.parametrize("local_attention", [8, 128])
def test_hidden_trailing_keys_match_an_attention_mask(vllm_context, monkeypatch, local_attention):
    """PyLate's hidden query expansion on the device: a sequence's trailing run of the
    expansion token is no row's key, as attention_mask 0 makes it in transformers."""
    reference, ours = random_modernbert(monkeypatch, local_attention)
    expansion = 7
    assert ours.hide_trailing_keys(expansion)
    ids = torch.randint(8, 300, (2, 12))
    ids[0, 7:] = expansion  # a query padded with five expansion tokens
    ids[1, 3] = expansion  # an expansion token inside a sequence stays visible
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[0, 7:] = 0
    positions = torch.arange(12).repeat(2)
    with torch.no_grad():
        want = reference(input_ids=ids, attention_mask=mask).last_hidden_state.reshape(24, -1)
        got = ours(ids.flatten(), positions)
        eager = ours.forward_hidden_keys(ids.flatten(), positions, (mask == 0).flatten())
    torch.testing.assert_close(got, want, rtol=0, atol=3e-5)
    torch.testing.assert_close(got, eager, rtol=0, atol=3e-5)


def test_an_encoder_off_the_in_graph_path_does_not_hide_keys(vllm_context, monkeypatch):
    # built as fp32 on CUDA is (our exact eager layouts, no vLLM attention layer to set up)
    monkeypatch.setattr(encoder_module.compat, "exact_attention_needed", lambda *_: True)
    config = transformers.ModernBertConfig(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=128, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, cls_token_id=1, sep_token_id=2,
    )  # fmt: skip
    ours = encoder_module.ModernBertEncoder(config, vllm_config=eager_vllm_config())
    assert not ours.rows_max_seqlen and not ours.vllm_attention and not ours.hide_trailing_keys(7)
    assert ours.hidden_tail_id is None


def test_attention_choice_keys_vllms_compile_cache(vllm_context, monkeypatch):
    """vLLM finds its compiled graph by ``VllmConfig.compute_hash()``, which does not see our
    environment: with the in-graph attention and without it the keys must differ (on an H200
    a server started with it after one without loaded that one's graph and failed to start)."""
    config = transformers.ModernBertConfig(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    # Without the in-graph attention: the exact eager path (fp32 on CUDA), which builds no vLLM attention
    # layer outside an engine; vLLM's attention is keyed the same way ("vllm").
    monkeypatch.setattr(encoder_module.compat, "exact_attention_needed", lambda *args: True)
    keys = {}
    for opted_in in (False, True):
        monkeypatch.setattr(
            encoder_module, "in_graph_attention_usable", lambda cfg, on=opted_in: on
        )
        vllm_config = eager_vllm_config()
        encoder_module.ModernBertEncoder(config, vllm_config=vllm_config)
        attention = vllm_config.additional_config["vllm_factory"]["modernbert_attention"]
        assert attention == ("rows" if opted_in else "eager")
        keys[opted_in] = vllm_config.compute_hash()
    assert keys[False] != keys[True]


def test_linear_layers_take_the_engines_quantization(vllm_context, monkeypatch):
    """``--quantization``: every vLLM linear layer is built with the engine's quantization
    config, under its own name."""
    from vllm_factory.testing.vllm_context import linears_asking_quantization

    monkeypatch.setattr(encoder_module, "in_graph_attention_usable", lambda cfg: True)

    config = transformers.ModernBertConfig(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    asked, linears = linears_asking_quantization(
        lambda engine: encoder_module.ModernBertEncoder(config, vllm_config=engine, prefix="model")
    )
    assert asked == linears
    assert len(linears) == config.num_hidden_layers * 4  # Wqkv, Wo, Wi, Wo
