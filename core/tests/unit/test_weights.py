"""load_by_name: checkpoint tensors into parameters by name (pure torch)."""

import pytest
import torch
from torch import nn
from vllm_factory.core.weights import load_by_name, stack_tensors


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(2, 3)
        self.norm = nn.LayerNorm(3)


def test_prefix_dropped_unknown_passed_over_and_dtype_cast() -> None:
    module = Small()
    weights = [
        ("model.proj.weight", torch.ones(3, 2, dtype=torch.float64)),
        ("proj.bias", torch.arange(3.0)),
        ("lm_head.weight", torch.zeros(5, 3)),
    ]
    assert load_by_name(module, weights) == {"proj.weight", "proj.bias"}
    assert module.proj.weight.dtype == torch.float32
    torch.testing.assert_close(module.proj.weight, torch.ones(3, 2))
    torch.testing.assert_close(module.proj.bias, torch.arange(3.0))


def test_weight_loader_is_used_when_the_parameter_has_one() -> None:
    module = Small()
    calls = []
    module.norm.weight.weight_loader = lambda param, tensor: calls.append(tensor.shape)
    load_by_name(module, [("norm.weight", torch.ones(3))])
    assert calls == [torch.Size([3])]


def test_shape_mismatch_and_strict_missing_are_refused() -> None:
    with pytest.raises(ValueError, match="proj.weight"):
        load_by_name(Small(), [("proj.weight", torch.ones(2, 2))])
    with pytest.raises(ValueError, match="lacks"):
        load_by_name(Small(), [("proj.weight", torch.ones(3, 2))], strict=True)


def test_caller_prefixes_rename_and_shards(caplog) -> None:
    module = Small()
    shards = []
    module.proj.weight.weight_loader = lambda param, tensor, shard: shards.append(shard)

    def rename(name: str):  # the checkpoint's "dense.<part>" is our "proj.<part>"
        if name.startswith("dense."):
            part = name.removeprefix("dense.")
            return f"proj.{part}", ("q" if part == "weight" else None)
        return None

    weights = [
        ("encoder.layer.dense.weight", torch.ones(3, 2)),
        ("dense.bias", torch.arange(3.0)),
        ("encoder.layer.head.weight", torch.ones(1)),  # no parameter: passed over
    ]
    with caplog.at_level("WARNING"):
        loaded = load_by_name(module, weights, prefixes=("encoder.layer.",), rename=rename)
    assert loaded == {"proj.weight", "proj.bias"} and shards == ["q"]
    torch.testing.assert_close(module.proj.bias, torch.arange(3.0))
    assert "norm.bias" in caplog.text  # not strict: the parameters left unloaded are named


def test_stack_tensors_concatenates_each_group_in_parts_order() -> None:
    q, k, v, o = (torch.full((n, 2), float(n)) for n in (4, 2, 3, 5))
    weights = [
        ("model.layers.0.attn.v_proj.weight", v),
        ("model.layers.0.attn.o_proj.weight", o),
        ("model.layers.0.attn.q_proj.weight", q),
        ("model.layers.1.attn.q_proj.weight", q + 1),
        ("model.layers.0.attn.k_proj.weight", k),
        ("model.layers.1.attn.k_proj.weight", k + 1),
        ("model.layers.1.attn.v_proj.weight", v + 1),
    ]
    out = dict(stack_tensors(weights, "qkv_proj", ("q_proj", "k_proj", "v_proj")))
    assert list(out) == [
        "model.layers.0.attn.o_proj.weight",
        "model.layers.0.attn.qkv_proj.weight",
        "model.layers.1.attn.qkv_proj.weight",
    ]
    assert torch.equal(out["model.layers.0.attn.qkv_proj.weight"], torch.cat((q, k, v)))
    assert torch.equal(out["model.layers.1.attn.qkv_proj.weight"], torch.cat((q, k, v)) + 1)


def test_stack_tensors_refuses_an_incomplete_group() -> None:
    weights = [("layers.0.q_proj.weight", torch.zeros(2, 2))]
    with pytest.raises(ValueError, match=r"layers\.0\.k_proj\.weight"):
        list(stack_tensors(weights, "qkv_proj", ("q_proj", "k_proj", "v_proj")))
