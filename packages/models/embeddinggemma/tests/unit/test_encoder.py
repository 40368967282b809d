"""Our packed bidirectional Gemma3 encoder and head vs transformers' ``Gemma3TextModel`` on the
same random weights, in-process (no server). Texts longer than the sliding window, GQA.

Built outside vLLM: our packed attention layouts (``vllm_attention=False``), no compile. The
path vLLM serves (its attention, compiled) is compared with the reference by the parity
suite, through a real server."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
encoder_module = pytest.importorskip("vllm_factory.models.embeddinggemma.encoder")


def tiny_config(**overrides):
    kwargs = {
        "vocab_size": 97, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "query_pre_attn_scalar": 16,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        "sliding_window": 8, "max_position_embeddings": 128, "use_bidirectional_attention": True,
        "hidden_activation": "gelu_pytorch_tanh", "initializer_range": 0.1,
    }  # fmt: skip
    kwargs.update(overrides)
    return transformers.Gemma3TextConfig(**kwargs)


def encoder(config, half_window):
    """The encoder as code outside vLLM builds it: our layouts, vLLM's compile off."""
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig

    eager = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
    return encoder_module.Gemma3BidirectionalEncoder(
        config, half_window=half_window, vllm_attention=False, vllm_config=eager
    )


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    config = tiny_config()
    reference = transformers.Gemma3TextModel(config).eval()
    with torch.no_grad():
        for name, param in reference.named_parameters():
            if name.endswith("norm.weight"):
                param.normal_(0.0, 0.2)
    ours = encoder(config, 8 // 2).eval()
    ours.load_weights(reference.state_dict().items())
    return reference, ours


@pytest.mark.parametrize("lengths", [[5], [30], [30, 7, 19, 30]])
def test_packed_encoder_matches_transformers(models, lengths):
    reference, ours = models
    torch.manual_seed(sum(lengths))
    sequences = [torch.randint(0, 97, (n,)) for n in lengths]
    with torch.no_grad():
        packed = ours(torch.cat(sequences), torch.cat([torch.arange(n) for n in lengths]))
        expected = [reference(input_ids=s[None]).last_hidden_state[0] for s in sequences]
    for got, want in zip(torch.split(packed, lengths), expected):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


def test_window_matters(models):
    """A sliding window of 8 changes a 30-token sequence's states (so the test above sees it)."""
    _, ours = models
    ids = torch.randint(0, 97, (30,))
    wide = encoder(ours.config, None).eval()
    wide.load_weights(ours.state_dict().items())
    with torch.no_grad():
        assert not torch.allclose(ours(ids, torch.arange(30)), wide(ids, torch.arange(30)))


def test_missing_weights_are_an_error(models):
    _, ours = models
    fresh = encoder(ours.config, 4)
    state = dict(ours.state_dict())
    state.pop("norm.weight")
    with pytest.raises(ValueError, match="norm.weight"):
        fresh.load_weights(state.items())
