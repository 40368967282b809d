"""ModernBERT encoder from vLLM's parallel layers and vllm-factory kernels.

Weight names follow Hugging Face's ``ModernBertModel`` (``embeddings.tok_embeddings``,
``layers.N.attn.Wqkv``, ``layers.N.mlp.Wi``, ``final_norm``, ...), so a model package maps
checkpoint names onto this module with at most a prefix change.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn
from vllm.model_executor.layers.linear import (
    MergedColumnParallelLinear,
    QKVParallelLinear,
    RowParallelLinear,
)
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
from vllm_factory.backbones.modernbert.attention import (
    LengthGroups,
    PackedBatch,
    VarlenBatch,
    attention_batch,
    packed_attention,
)
from vllm_factory.core import compat
from vllm_factory.core.weights import load_by_name
from vllm_factory.kernels import (
    build_rope_cache,
    fused_add_layernorm,
    fused_geglu,
    fused_layernorm,
    fused_rope,
)

vllm_ops = compat.custom_ops()  # vLLM's C++ / CUDA ops (rotary embedding, RMSNorm)

GLOBAL, LOCAL = "full_attention", "sliding_attention"

RopeCache = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # cos, sin, cat(cos, sin)


def layer_types(config) -> list[str]:
    types = getattr(config, "layer_types", None)
    if types:
        return list(types)
    every = getattr(config, "global_attn_every_n_layers", 3)
    return [GLOBAL if i % every == 0 else LOCAL for i in range(config.num_hidden_layers)]


def rope_theta(config, layer_type: str) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    theta = (params.get(layer_type) or {}).get("rope_theta")
    if theta is not None:
        return float(theta)
    if layer_type == GLOBAL:
        return float(getattr(config, "global_rope_theta", 160000.0))
    return float(getattr(config, "local_rope_theta", 10000.0))


def norm_eps(config) -> float:
    return float(getattr(config, "norm_eps", None) or getattr(config, "layer_norm_eps", 1e-5))


class LayerNorm(nn.Module):
    """LayerNorm over the last dim through the fused kernel (ModernBERT has no bias)."""

    def __init__(self, size: int, eps: float, bias: bool) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_layernorm(x, self.weight, self.bias, self.eps)

    def add_and_norm(self, x: torch.Tensor, residual: torch.Tensor):
        """``(norm(x + residual), x + residual)`` in one pass."""
        return fused_add_layernorm(x, residual, self.weight, self.bias, self.eps)


class Embeddings(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.tok_embeddings = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.norm = LayerNorm(config.hidden_size, norm_eps(config), config.norm_bias)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.norm(self.tok_embeddings(input_ids))


class Attention(nn.Module):
    def __init__(self, config, layer_type: str, prefix: str = "") -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // self.num_heads
        self.scale = self.head_dim**-0.5
        hidden, bias = config.hidden_size, config.attention_bias
        self.Wqkv = QKVParallelLinear(
            hidden, self.head_dim, self.num_heads, bias=bias, prefix=f"{prefix}.Wqkv"
        )
        self.Wo = RowParallelLinear(hidden, hidden, bias=bias, prefix=f"{prefix}.Wo")
        # HF masks keys farther than local_attention // 2 on sliding-window layers.
        self.half_window = config.local_attention // 2 if layer_type == LOCAL else None
        self.layer_type = layer_type

    def forward(
        self,
        hidden_states: torch.Tensor,
        positions: torch.Tensor,
        batch: PackedBatch | LengthGroups | VarlenBatch,
        rope: RopeCache,
    ) -> torch.Tensor:
        qkv, _ = self.Wqkv(hidden_states)
        tokens = qkv.shape[0]
        heads = qkv.shape[1] // (3 * self.head_dim)  # this rank's heads under TP
        cos, sin, cos_sin = rope
        if qkv.is_cuda:
            q, k, v = qkv.view(tokens, 3, heads, self.head_dim).unbind(1)
            q, k = fused_rope(q, k, positions, cos, sin)
        else:
            # On CPU vLLM's C++ rotary op (in place, on views of qkv) beats the PyTorch
            # fallback several times over; same rotate-half math, same fp32 angles.
            width = heads * self.head_dim
            q_flat, k_flat = qkv[:, :width], qkv[:, width : 2 * width]
            vllm_ops.rotary_embedding(positions, q_flat, k_flat, self.head_dim, cos_sin, True)
            q, k, v = qkv.view(tokens, 3, heads, self.head_dim).unbind(1)
        out = packed_attention(q, k, v, batch, self.scale, self.half_window)
        return self.Wo(out)[0]


class MLP(nn.Module):
    def __init__(self, config, prefix: str = "") -> None:
        super().__init__()
        hidden, inner = config.hidden_size, config.intermediate_size
        # Wi holds the GeGLU input and gate halves: [hidden] -> [2 * inner].
        self.Wi = MergedColumnParallelLinear(
            hidden, [inner, inner], bias=config.mlp_bias, prefix=f"{prefix}.Wi"
        )
        self.Wo = RowParallelLinear(inner, hidden, bias=config.mlp_bias, prefix=f"{prefix}.Wo")
        self.approximate = "tanh" if "tanh" in str(config.hidden_activation) else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.Wo(fused_geglu(self.Wi(x)[0], self.approximate))[0]


class Layer(nn.Module):
    def __init__(self, config, index: int, layer_type: str, prefix: str = "") -> None:
        super().__init__()
        eps, bias = norm_eps(config), config.norm_bias
        # Layer 0 reads the (already normalised) embeddings directly.
        self.attn_norm = nn.Identity() if index == 0 else LayerNorm(config.hidden_size, eps, bias)
        self.attn = Attention(config, layer_type, prefix=f"{prefix}.attn")
        self.mlp_norm = LayerNorm(config.hidden_size, eps, bias)
        self.mlp = MLP(config, prefix=f"{prefix}.mlp")

    def forward(self, hidden_states, positions, batch, rope) -> torch.Tensor:
        attn_out = self.attn(self.attn_norm(hidden_states), positions, batch, rope)
        normed, hidden_states = self.mlp_norm.add_and_norm(attn_out, hidden_states)
        return hidden_states + self.mlp(normed)


class ModernBertEncoder(nn.Module):
    """Embeddings -> N layers -> final norm, on vLLM's packed ``[T]`` token batch."""

    def __init__(self, config, prefix: str = "") -> None:
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        types = layer_types(config)
        self.layers = nn.ModuleList(
            Layer(config, i, types[i], prefix=f"{prefix}.layers.{i}")
            for i in range(config.num_hidden_layers)
        )
        self.final_norm = LayerNorm(config.hidden_size, norm_eps(config), config.norm_bias)
        head_dim = config.hidden_size // config.num_attention_heads
        self._rope_spec = {
            t: (config.max_position_embeddings, head_dim, rope_theta(config, t)) for t in set(types)
        }
        self._rope: dict[str, RopeCache] = {}

    def rope_for(self, layer_type: str, device: torch.device, dtype: torch.dtype) -> RopeCache:
        """fp32 cos / sin for our kernels; cat(cos, sin) in the model dtype for vLLM's CPU
        rotary op, which requires the cache dtype to equal the query dtype."""
        cache = self._rope.get(layer_type)
        if cache is None or cache[0].device != device or cache[2].dtype != dtype:
            positions, head_dim, theta = self._rope_spec[layer_type]
            cos, sin = build_rope_cache(positions, head_dim, theta, device=device)
            cache = (cos, sin, torch.cat((cos, sin), dim=-1).to(dtype).contiguous())
            self._rope[layer_type] = cache
        return cache

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embeddings.tok_embeddings(input_ids)

    def forward(
        self, input_ids: Tensor, positions: Tensor, hidden_keys: Tensor | None = None
    ) -> Tensor:
        head_dim = self.config.hidden_size // self.config.num_attention_heads
        hidden_states = self.embeddings(input_ids)
        batch = attention_batch(positions, hidden_keys, head_dim, hidden_states.dtype)
        for layer in self.layers:
            rope = self.rope_for(layer.attn.layer_type, hidden_states.device, hidden_states.dtype)
            hidden_states = layer(hidden_states, positions, batch, rope)
        return self.final_norm(hidden_states)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load Hugging Face ``ModernBertModel`` names (optionally prefixed ``model.``; an MLM
        head is passed over)."""
        return load_by_name(self, weights)
