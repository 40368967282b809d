"""GeGLU fallback vs a naive reference and vs HF ModernBERT's MLP activation (fp32, CPU)."""

from __future__ import annotations

import pytest
import torch
from kernels_reference import close, ref_geglu
from vllm_factory.kernels import fused_geglu


@pytest.mark.parametrize("tokens", [1, 7, 130])
@pytest.mark.parametrize("inter", [48, 64, 96, 1152])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_fallback_matches_reference(tokens: int, inter: int, approximate: str):
    x = torch.randn(tokens, 2 * inter, generator=torch.Generator().manual_seed(inter + tokens)) * 3
    out = fused_geglu(x, approximate, backend="torch")
    assert out.shape == (tokens, inter)
    close(out, ref_geglu(x, approximate))


def test_leading_dims_and_auto():
    x = torch.randn(2, 5, 64)
    out = fused_geglu(x)
    assert out.shape == (2, 5, 32)
    close(out, ref_geglu(x, "none"))


def test_rejects_bad_args():
    with pytest.raises(ValueError):
        fused_geglu(torch.randn(3, 7))
    with pytest.raises(ValueError):
        fused_geglu(torch.randn(3, 8), approximate="sigmoid")


@pytest.mark.parametrize(
    ("activation", "approximate"), [("gelu", "none"), ("gelu_pytorch_tanh", "tanh")]
)
@pytest.mark.parametrize(("hidden", "inter"), [(96, 144), (768, 1152)])
def test_matches_hf_modernbert_mlp(activation: str, approximate: str, hidden: int, inter: int):
    modeling = pytest.importorskip("transformers.models.modernbert.modeling_modernbert")
    from transformers import ModernBertConfig

    torch.manual_seed(hidden)
    config = ModernBertConfig(
        hidden_size=hidden,
        num_attention_heads=hidden // 32,
        num_hidden_layers=1,
        intermediate_size=inter,
        hidden_activation=activation,
    )
    mlp = modeling.ModernBertMLP(config).eval()
    h = torch.randn(130, hidden)
    with torch.no_grad():
        expected = mlp(h)
        ours = mlp.Wo(fused_geglu(mlp.Wi(h), approximate))
        # The activation alone too, through HF's ACT2FN table.
        inp, gate = mlp.Wi(h).chunk(2, dim=-1)
        act_only = modeling.ACT2FN[activation](inp) * gate
    close(ours, expected)
    close(fused_geglu(torch.cat((inp, gate), dim=-1), approximate), act_only)
