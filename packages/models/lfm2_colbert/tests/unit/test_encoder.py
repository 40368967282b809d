"""Our packed LFM2 encoder vs transformers' ``Lfm2Model`` (random weights, fp32, no vLLM)."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
from vllm_factory.models.lfm2_colbert.encoder import Lfm2Encoder


def eager_vllm_config():
    """Built outside vLLM's engine: vLLM's compile off (the op runs eagerly)."""
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig

    return VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))


def random_lfm2(conv_bias: bool = False):
    config = transformers.Lfm2Config(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        layer_types=["conv", "full_attention", "conv", "full_attention"],
        block_multiple_of=32,
        conv_bias=conv_bias,
        initializer_range=0.1,
    )
    torch.manual_seed(0)
    reference = transformers.Lfm2Model(config).eval()
    with torch.no_grad():
        for name, param in reference.named_parameters():
            if "conv.conv" in name or "norm" in name or name.endswith("bias"):
                param.normal_(1.0 if "norm" in name else 0.0, 0.5)
    ours = Lfm2Encoder(config, vllm_config=eager_vllm_config()).eval()
    loaded = ours.load_weights((f"model.{n}", t) for n, t in reference.state_dict().items())
    assert loaded == {name for name, _ in ours.named_parameters()}
    return reference, ours


def packed(lengths: list[int]) -> torch.Tensor:
    return torch.cat([torch.arange(n) for n in lengths])


@pytest.mark.parametrize("conv_bias", [False, True])
def test_packed_sequences_match_one_by_one(conv_bias):
    reference, ours = random_lfm2(conv_bias)
    lengths = [5, 9, 9, 1, 17, 2]
    ids = [torch.randint(3, 300, (n,)) for n in lengths]
    with torch.no_grad():
        got = ours(torch.cat(ids), packed(lengths))
        want = torch.cat([reference(input_ids=i[None]).last_hidden_state[0] for i in ids])
    torch.testing.assert_close(got, want, rtol=0, atol=2e-5)


def test_hidden_tokens_match_a_padded_batch():
    """Trailing tokens with attention_mask 0 in a batch of two rows (PyLate's expanded
    queries): invisible as keys, convolution input zeroed."""
    reference, ours = random_lfm2()
    ids = torch.randint(3, 300, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[0, 7:] = 0
    mask[1, 10:] = 0
    with torch.no_grad():
        want = reference(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours.forward_hidden_keys(ids.flatten(), packed([12, 12]), (mask == 0).flatten())
    torch.testing.assert_close(got, want.reshape(24, -1), rtol=0, atol=2e-5)


def test_attention_is_a_splitting_op_of_the_compiled_graph():
    """vLLM must split the compiled graph at our attention op (it reads the layout on the
    host): building the encoder adds it to vLLM's splitting ops."""
    from vllm_factory.models.lfm2_colbert.encoder import ATTENTION_OP

    reference, _ = random_lfm2()
    config = eager_vllm_config()
    config.compilation_config.splitting_ops = ["vllm::unified_attention"]
    Lfm2Encoder(reference.config, vllm_config=config)
    assert config.compilation_config.splitting_ops == ["vllm::unified_attention", ATTENTION_OP]


def test_split_point_writes_into_the_callers_buffer():
    """Under piecewise CUDA graphs the graph piece after the split point reads the addresses
    it saw at capture: the op must write into the buffer the piece before it allocated (as
    vLLM's attention ops do) and return nothing. A returned tensor put served vectors at
    cosine 0.13 of PyLate's on an H200, a GPU-only failure this test stands in for."""
    from vllm_factory.kernels.lfm2_attention import PackedSequences, attend

    op = torch.ops.vllm_factory.lfm2_causal_attention.default
    schema = op._schema
    assert not schema.returns
    mutated = [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write]
    assert mutated == ["out"]
    torch.manual_seed(0)
    positions = packed([3, 5, 5])
    q, k, v = (torch.randn(13, 2, 8) for _ in range(3))
    out = torch.zeros(13, 2, 8)
    address = out.data_ptr()
    assert op(q, k, v, positions, 0.5, out) is None
    want = torch.empty_like(q)
    attend(q, k, v, PackedSequences.from_positions(positions), 0.5, want)
    assert out.data_ptr() == address
    torch.testing.assert_close(out, want)
