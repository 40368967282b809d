"""The relative-position projections under vLLM's LoRA (``projected_relative_scores``): each
token's c2p / p2c scores use its own adapter's projection of the relative embeddings, none for
a token of no adapter (slot -1), as a per-token loop computes them."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn
from vllm_factory.backbones.deberta.encoder import projected_relative_scores
from vllm_factory.kernels import relative_scores

HEADS, HEAD_DIM, HIDDEN, RANK, SLOTS, REL = 2, 8, 16, 4, 3, 10


class LoRAWrapped(nn.Module):
    """What the function reads of one of vLLM's LoRA linear wrappers: ``base_layer`` (returns
    ``(output, bias)``), the stacked ``lora_a`` / ``lora_b`` per slot (scaling folded into B),
    and the batch's slot per token."""

    def __init__(self, slots_of_tokens: list[int]) -> None:
        super().__init__()
        linear = nn.Linear(HIDDEN, HEADS * HEAD_DIM)
        self.base_layer = lambda x: (linear(x), None)
        self.linear = linear
        self.lora_a_stacked = (torch.randn(SLOTS, 1, RANK, HIDDEN),)
        self.lora_b_stacked = (torch.randn(SLOTS, 1, HEADS * HEAD_DIM, RANK),)
        # vLLM's buffer is as long as the most tokens a step may hold; past the step's tokens
        # it holds whatever an earlier step left there.
        buffer = torch.tensor([*slots_of_tokens, 2, 0, 1])
        self.punica_wrapper = SimpleNamespace(_token_lora_indices=buffer)

    def project(self, rel: torch.Tensor, slot: int) -> torch.Tensor:
        out = self.linear(rel)
        if slot >= 0:
            a, b = self.lora_a_stacked[0][slot, 0], self.lora_b_stacked[0][slot, 0]
            out = out + rel @ a.T @ b.T
        return out.view(rel.shape[0], HEADS, HEAD_DIM)


def test_each_token_through_its_adapter():
    torch.manual_seed(0)
    slots = [0, 2, -1, 1, 1, -1, 0]
    proj = LoRAWrapped(slots)
    x = torch.randn(len(slots), HEADS, HEAD_DIM)
    rel = torch.randn(REL, HIDDEN)
    with torch.no_grad():
        got = projected_relative_scores(x, proj, rel)
        want = torch.stack(
            [
                relative_scores(x[t : t + 1], proj.project(rel, s))[:, 0]
                for t, s in enumerate(slots)
            ],
            dim=1,
        )  # [H, T, REL]
    assert got.shape == (HEADS, len(slots), REL)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_plain_layer_unchanged():
    """A layer without LoRA: ``relative_scores(x, proj(rel))`` as before."""
    torch.manual_seed(2)
    linear = nn.Linear(HIDDEN, HEADS * HEAD_DIM)

    class Plain(nn.Module):
        def forward(self, t):
            return linear(t), None

    x = torch.randn(5, HEADS, HEAD_DIM)
    rel = torch.randn(REL, HIDDEN)
    with torch.no_grad():
        got = projected_relative_scores(x, Plain(), rel)
        want = relative_scores(x, linear(rel).view(REL, HEADS, HEAD_DIM))
    torch.testing.assert_close(got, want)
