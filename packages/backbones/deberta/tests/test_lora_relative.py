"""The relative-position projections under vLLM's LoRA (``projected_relative_scores``): each
token's c2p / p2c scores use its own adapter's projection of the relative embeddings (the
query or key slice of the packed ``qkv_proj``), none for a token of no adapter (slot -1), as a
per-token loop computes them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn
from vllm_factory.backbones.deberta.encoder import (
    base_projection,
    packed_name,
    projected_relative_scores,
)
from vllm_factory.kernels import relative_scores

HEADS, HEAD_DIM, HIDDEN, RANK, SLOTS, REL = 2, 8, 16, 4, 3, 10
WIDTH = HEADS * HEAD_DIM


class PackedLoRAWrapped(nn.Module):
    """What the encoder reads of vLLM's LoRA wrapper of the packed ``qkv_proj``: ``base_layer``
    (returns ``(output, bias)``), the stacked ``lora_a`` / ``lora_b`` per slice and slot
    (scaling folded into B), and the batch's slot per token."""

    def __init__(self, slots_of_tokens: list[int]) -> None:
        super().__init__()
        linear = nn.Linear(HIDDEN, 3 * WIDTH)
        self.base_layer = lambda x: (linear(x), None)
        self.linear = linear
        self.lora_a_stacked = tuple(torch.randn(SLOTS, 1, RANK, HIDDEN) for _ in range(3))
        self.lora_b_stacked = tuple(torch.randn(SLOTS, 1, WIDTH, RANK) for _ in range(3))
        # vLLM's buffer is as long as the most tokens a step may hold; past the step's tokens
        # it holds whatever an earlier step left there.
        buffer = torch.tensor([*slots_of_tokens, 2, 0, 1])
        self.punica_wrapper = SimpleNamespace(_token_lora_indices=buffer)

    def project(self, rel: torch.Tensor, slot: int, part: int) -> torch.Tensor:
        out = self.linear(rel)[:, part * WIDTH : (part + 1) * WIDTH]
        if slot >= 0:
            a, b = self.lora_a_stacked[part][slot, 0], self.lora_b_stacked[part][slot, 0]
            out = out + rel @ a.T @ b.T
        return out.view(rel.shape[0], HEADS, HEAD_DIM)


@pytest.mark.parametrize("part", [0, 1], ids=["query (p2c)", "key (c2p)"])
def test_each_token_through_its_adapter(part):
    torch.manual_seed(part)
    slots = [0, 2, -1, 1, 1, -1, 0]
    proj = PackedLoRAWrapped(slots)
    x = torch.randn(len(slots), HEADS, HEAD_DIM)
    rel = torch.randn(REL, HIDDEN)
    with torch.no_grad():
        pos = base_projection(proj, rel).view(REL, -1, HEAD_DIM).chunk(3, dim=1)[part]
        got = projected_relative_scores(x, pos, proj, rel, part)
        want = torch.stack(
            [
                relative_scores(x[t : t + 1], proj.project(rel, s, part))[:, 0]
                for t, s in enumerate(slots)
            ],
            dim=1,
        )  # [H, T, REL]
    assert got.shape == (HEADS, len(slots), REL)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_plain_layer_unchanged():
    """A layer without LoRA: ``relative_scores(x, proj(rel))``."""
    torch.manual_seed(2)
    linear = nn.Linear(HIDDEN, WIDTH)

    class Plain(nn.Module):
        def forward(self, t):
            return linear(t), None

    x = torch.randn(5, HEADS, HEAD_DIM)
    rel = torch.randn(REL, HIDDEN)
    with torch.no_grad():
        pos = base_projection(Plain(), rel).view(REL, HEADS, HEAD_DIM)
        got = projected_relative_scores(x, pos, Plain(), rel, 0)
        want = relative_scores(x, linear(rel).view(REL, HEADS, HEAD_DIM))
    torch.testing.assert_close(got, want)


def test_checkpoint_names_to_the_packed_layer():
    assert packed_name("encoder.layer.3.attention.self.key_proj.weight") == (
        "encoder.layer.3.attention.self.qkv_proj.weight",
        "k",
    )
    assert packed_name("encoder.layer.0.attention.self.query_proj.bias") == (
        "encoder.layer.0.attention.self.qkv_proj.bias",
        "q",
    )
    assert packed_name("encoder.layer.0.attention.self.pos_key_proj.weight") == (
        "encoder.layer.0.attention.self.pos_key_proj.weight",
        None,
    )
