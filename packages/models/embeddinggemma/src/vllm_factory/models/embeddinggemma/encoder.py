"""The Gemma3 text backbone run bidirectionally, on vLLM's packed token batch.

Weight names follow Hugging Face's ``Gemma3TextModel`` (``embed_tokens``,
``layers.N.self_attn.{q,k,v,o}_proj``, ``layers.N.self_attn.{q,k}_norm``,
``layers.N.mlp.{gate,up,down}_proj``, the four per-layer norms and ``norm``), which is how a
sentence-transformers EmbeddingGemma checkpoint stores them at its top level.

Global layers see every token of their sequence; sliding layers see keys within
``half_window`` tokens on either side, as Hugging Face's bidirectional Gemma3 mask does
(``|query - key| < sliding_window // 2 + 1`` for the configured window). Two attention paths
over the same weights:

- vLLM's ``EncoderOnlyAttention`` (the backend vLLM picks for the device and dtype; a sliding
  layer's window is ``half_window + 1``, vLLM's bound being exclusive). vLLM then compiles the
  encoder with ``torch.compile`` and replays it from piecewise CUDA graphs split at attention,
  as it does for its own Gemma3. Under compile the norms and RoPE are the kernels' PyTorch
  fallbacks, which Inductor fuses.
- The kernels wheel's packed layouts (``vllm_factory.kernels.packed_attention``: SDPA per run
  of equal-length sequences on CPU, one padded call elsewhere), eagerly: where vLLM's
  attention is not exact enough for fp32 parity (fp32 on CUDA, ``compat.exact_attention_needed``),
  and when the encoder is built outside vLLM (``vllm_attention=False``, the in-process tests).

Plain ``torch.nn`` linear layers keep this independent of vLLM's layer signatures across
versions; tensor parallelism is not supported (the model is small).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from vllm.compilation.decorators import support_torch_compile
from vllm.model_executor.layers.attention import EncoderOnlyAttention
from vllm_factory.core import compat
from vllm_factory.core.weights import load_by_name, stack_tensors
from vllm_factory.kernels import RMSNorm, RMSOptions, fused_rope
from vllm_factory.kernels.packed_attention import attention_batch, packed_attention

GLOBAL, SLIDING = "full_attention", "sliding_attention"
# Gemma stores weight - 1 and scales in fp32: x_normed * (1 + weight), rounded once.
GEMMA_RMS = RMSOptions(offset=1.0)
QKV = ("q_proj", "k_proj", "v_proj")


def layer_types(config: Any) -> list[str]:
    types = getattr(config, "layer_types", None)
    if types:
        return list(types)
    pattern = int(getattr(config, "sliding_window_pattern", 6))
    return [SLIDING if (i + 1) % pattern else GLOBAL for i in range(config.num_hidden_layers)]


def rope_parameters(config: Any, layer_type: str) -> dict[str, Any]:
    """RoPE settings of one layer type, from the current or the older config layout."""
    params = getattr(config, "rope_parameters", None) or {}
    if params.get(layer_type):
        return dict(params[layer_type])
    if layer_type == SLIDING:
        return {"rope_type": "default", "rope_theta": config.rope_local_base_freq}
    scaling = dict(getattr(config, "rope_scaling", None) or {})
    scaling.setdefault("rope_type", scaling.pop("type", "default"))
    return {"rope_theta": config.rope_theta, **scaling}


def build_rope(
    params: dict[str, Any], head_dim: int, max_positions: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` halves ``[max_positions, head_dim // 2]`` in fp32, as HF computes them."""
    rope_type = params.get("rope_type", "default")
    inv_freq = 1.0 / (
        float(params["rope_theta"])
        ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    )
    if rope_type == "linear":
        inv_freq = inv_freq / float(params["factor"])
    elif rope_type != "default":
        raise ValueError(f"RoPE type {rope_type!r} is not supported")
    positions = torch.arange(max_positions, dtype=torch.float32)
    freqs = positions[:, None] * inv_freq[None, :]
    return freqs.cos(), freqs.sin()


class Rotary(nn.Module):
    """fp32 ``cos`` / ``sin`` halves of one layer type, built once on the model's device."""

    def __init__(self, params: dict[str, Any], head_dim: int, max_positions: int) -> None:
        super().__init__()
        cos, sin = build_rope(params, head_dim, max_positions)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)


class Attention(nn.Module):
    def __init__(
        self,
        config: Any,
        layer_type: str,
        half_window: int | None,
        prefix: str = "",
        vllm_attention: bool = True,
    ) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        bias = bool(getattr(config, "attention_bias", False))
        self.sizes = [n * self.head_dim for n in (self.num_heads, *[self.num_kv_heads] * 2)]
        self.qkv_proj = nn.Linear(hidden, sum(self.sizes), bias=bias)  # q_proj, k_proj, v_proj
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, GEMMA_RMS)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, GEMMA_RMS)
        self.scale = float(config.query_pre_attn_scalar) ** -0.5
        self.layer_type = layer_type
        self.half_window = half_window if layer_type == SLIDING else None
        self.attn = None
        if vllm_attention:
            window = None if self.half_window is None else self.half_window + 1
            self.attn = EncoderOnlyAttention(
                self.num_heads,
                self.head_dim,
                self.scale,
                num_kv_heads=self.num_kv_heads,
                prefix=f"{prefix}.attn",
                per_layer_sliding_window=window,
            )

    def forward(self, x, positions, batch, rope: Rotary) -> torch.Tensor:
        """``batch`` None: vLLM's attention; else one of our packed layouts."""
        tokens = x.shape[0]
        q, k, v = self.qkv_proj(x).split(self.sizes, dim=-1)
        q = self.q_norm(q.view(tokens, self.num_heads, self.head_dim))
        k = self.k_norm(k.view(tokens, self.num_kv_heads, self.head_dim))
        v = v.view(tokens, self.num_kv_heads, self.head_dim)
        q, k = fused_rope(q, k, positions, rope.cos, rope.sin)
        if batch is None:
            return self.o_proj(self.attn(q.flatten(1), k.flatten(1), v.flatten(1)))
        if self.num_kv_heads != self.num_heads:  # grouped-query attention
            repeat = self.num_heads // self.num_kv_heads
            k = k.repeat_interleave(repeat, dim=1)
            v = v.repeat_interleave(repeat, dim=1)
        out = packed_attention(q, k, v, batch, self.scale, self.half_window)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        hidden, inter = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        activation = str(config.hidden_activation)
        if activation not in ("gelu_pytorch_tanh", "gelu"):
            raise ValueError(f"hidden_activation {activation!r} is not supported")
        self.approximate = "tanh" if activation == "gelu_pytorch_tanh" else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = F.gelu(self.gate_proj(x), approximate=self.approximate)
        return self.down_proj(gate * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, config: Any, self_attn: Attention) -> None:
        super().__init__()
        eps = config.rms_norm_eps
        self.input_layernorm = RMSNorm(config.hidden_size, eps, GEMMA_RMS)
        self.self_attn = self_attn
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps, GEMMA_RMS)
        self.pre_feedforward_layernorm = RMSNorm(config.hidden_size, eps, GEMMA_RMS)
        self.mlp = MLP(config)
        self.post_feedforward_layernorm = RMSNorm(config.hidden_size, eps, GEMMA_RMS)

    def forward(self, x, positions, batch, rope) -> torch.Tensor:
        attn = self.self_attn(self.input_layernorm(x), positions, batch, rope)
        x = x + self.post_attention_layernorm(attn)
        mlp = self.mlp(self.pre_feedforward_layernorm(x))
        return x + self.post_feedforward_layernorm(mlp)


@support_torch_compile(
    dynamic_arg_dims={"input_ids": 0, "positions": 0},
    enable_if=compat.compiles_with_vllm_attention,
)
class Gemma3BidirectionalEncoder(nn.Module):
    """Scaled embeddings -> N Gemma3 layers (bidirectional) -> final norm, on ``[T]`` tokens.

    ``vllm_attention``: None (in vLLM) decides from the dtype and device the model is built
    with (see the module docstring); False keeps our packed layouts, for use outside vLLM."""

    def __init__(
        self, config, half_window: int | None, prefix: str = "", vllm_attention=None
    ) -> None:
        super().__init__()
        if getattr(config, "attn_logit_softcapping", None) is not None:
            raise ValueError("attention logit soft-capping is not supported")
        if vllm_attention is None:
            # vLLM builds the model with its dtype and device as torch's defaults.
            device = torch.get_default_device().type
            vllm_attention = not compat.exact_attention_needed(torch.get_default_dtype(), device)
        self.vllm_attention = bool(vllm_attention)
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_scale = float(config.hidden_size) ** 0.5
        types = layer_types(config)
        self.layers = nn.ModuleList(
            Layer(
                config,
                Attention(
                    config,
                    types[i],
                    half_window,
                    f"{prefix}.layers.{i}.self_attn",
                    self.vllm_attention,
                ),
            )
            for i in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, GEMMA_RMS)
        self.rope = nn.ModuleDict(
            {
                t: Rotary(
                    rope_parameters(config, t), config.head_dim, config.max_position_embeddings
                )
                for t in sorted(set(types))
            }
        )

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        weight = self.embed_tokens.weight
        scale = torch.tensor(self.embed_scale, dtype=torch.float32).to(weight.dtype)
        return self.embed_tokens(input_ids) * scale

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden = self.embed_input_ids(input_ids)
        batch = None
        if not self.vllm_attention:
            batch = attention_batch(positions)
        for layer in self.layers:
            rope = self.rope[layer.self_attn.layer_type]
            hidden = layer(hidden, positions, batch, rope)
        return self.norm(hidden)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load ``Gemma3TextModel`` names (a ``model.`` prefix is accepted and dropped; an LM
        head is passed over); every parameter must be in the checkpoint. Each layer's
        ``q_proj`` / ``k_proj`` / ``v_proj`` load stacked into ``qkv_proj`` (one matmul)."""
        return load_by_name(self, stack_tensors(weights, "qkv_proj", QKV), strict=True)
