"""LFM2 (``Lfm2Model``) over vLLM's packed ``[num_tokens, hidden]`` batch.

Exactly what transformers' ``Lfm2Model`` computes when PyLate / sentence-transformers load an
LFM2 ColBERT checkpoint: causal attention (GQA, per-head RMSNorm on queries and keys, rotary
embeddings) and causal gated short convolutions, each sequence on its own. Tokens marked
``hidden`` (a query's expansion tokens, attention_mask 0 in PyLate) are invisible as
attention keys and have their convolution input zeroed, as transformers does for padding in
a batch of more than one row.

Module and parameter names follow transformers' ``Lfm2Model``, so checkpoint tensors load
by name. Plain torch layers (no tensor parallelism): the model is 350M parameters.

Compiled by vLLM: ``forward`` (every key visible) carries ``support_torch_compile``. No vLLM
attention backend is causal without a KV cache, so attention is our own op,
``vllm_factory::lfm2_causal_attention`` (SDPA per run of equal-length sequences;
``vllm_factory.kernels.lfm2_attention``), which the encoder adds to vLLM's splitting ops: vLLM splits the graph there as at its own attention,
replays the rest (projections, norms, convolutions, MLPs) from piecewise CUDA graphs, and runs
the op eagerly between them, where it reads the sequence layout from the positions (one host
sync per step, shared by every attention layer) and writes into an output buffer the graph
allocated. The convolutions need no layout: a token reads the ``k``-th
previous token only where its own position is at least ``k``, which stays correct when vLLM
pads a batch for a CUDA graph (padding sits after the last sequence, and nothing reads ahead).
``forward_hidden_keys`` (PyLate's hidden query expansion) runs eagerly.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn
from vllm.compilation.decorators import support_torch_compile
from vllm_factory.core import compat
from vllm_factory.core.weights import load_by_name, stack_tensors
from vllm_factory.kernels import RMSNorm, RMSOptions
from vllm_factory.kernels.lfm2_attention import LFM2_ATTENTION_OP, PackedSequences, attend
from vllm_factory.kernels.packed_step_cache import cache_layouts_per_step

ATTENTION, CONV = "full_attention", "conv"
# transformers' Lfm2RMSNorm: weight * x_normed.to(dtype).
LFM2_RMS = RMSOptions(round_before_weight=True)


def layer_types(config) -> list[str]:
    types = getattr(config, "layer_types", None)
    if types:
        return list(types)
    attention = set(getattr(config, "full_attn_idxs", None) or range(config.num_hidden_layers))
    return [ATTENTION if i in attention else CONV for i in range(config.num_hidden_layers)]


def rope_theta(config) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    kind = params.get("rope_type", "default")
    if kind != "default":
        raise ValueError(f"LFM2 rope_type {kind!r} is not supported (only 'default')")
    return float(params.get("rope_theta", getattr(config, "rope_theta", 1_000_000.0)))


def ffn_size(config) -> int:
    """Feed-forward width, adjusted as transformers' ``Lfm2MLP`` does."""
    size = int(config.intermediate_size)
    if getattr(config, "block_auto_adjust_ff_dim", False):
        size = int(2 * size / 3)
        multiplier = getattr(config, "block_ffn_dim_multiplier", None)
        if multiplier is not None:
            size = int(multiplier * size)
            step = int(config.block_multiple_of)
            size = step * ((size + step - 1) // step)
    return size


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on ``[T, H, D]`` with ``[T, 1, D]`` cos / sin (half-split layout)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


ATTENTION_OP = LFM2_ATTENTION_OP
# The split-point op's layout, read once per model step (vLLM's forward context).
cache_layouts_per_step(compat.step_cached)


class Attention(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or hidden // self.heads
        self.scale = self.head_dim**-0.5
        self.sizes = [n * self.head_dim for n in (self.heads, self.kv_heads, self.kv_heads)]
        self.qkv_proj = nn.Linear(hidden, sum(self.sizes), bias=False)  # q_proj, k_proj, v_proj
        self.out_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)
        self.q_layernorm = RMSNorm(self.head_dim, config.norm_eps, LFM2_RMS)
        self.k_layernorm = RMSNorm(self.head_dim, config.norm_eps, LFM2_RMS)

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        batch: PackedSequences | None,
        rope: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        """``batch`` None: the split-point op (compiled path); else :func:`attend` on it."""
        tokens = x.shape[0]
        q, k, v = self.qkv_proj(x).split(self.sizes, dim=-1)
        q = self.q_layernorm(q.view(tokens, self.heads, self.head_dim))
        k = self.k_layernorm(k.view(tokens, self.kv_heads, self.head_dim))
        v = v.view(tokens, self.kv_heads, self.head_dim)
        q, k = rotate(q, *rope), rotate(k, *rope)
        if self.kv_heads != self.heads:  # GQA: query head i reads kv head i // groups
            groups = self.heads // self.kv_heads
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = torch.empty_like(q)
        if batch is None:
            torch.ops.vllm_factory.lfm2_causal_attention(q, k, v, positions, self.scale, out)
        else:
            attend(q, k, v, batch, self.scale, out)
        return self.out_proj(out.view(tokens, -1))


class ShortConv(nn.Module):
    """Gated depthwise causal convolution: ``out_proj(C * conv(B * x))``."""

    def __init__(self, config) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.width = int(config.conv_L_cache)
        bias = bool(getattr(config, "conv_bias", False))
        # Same layout as nn.Conv1d(hidden, hidden, width, groups=hidden): weight [H, 1, width].
        self.conv = nn.Module()
        self.conv.weight = nn.Parameter(torch.empty(hidden, 1, self.width))
        self.conv.bias = nn.Parameter(torch.zeros(hidden)) if bias else None
        self.in_proj = nn.Linear(hidden, 3 * hidden, bias=bias)
        self.out_proj = nn.Linear(hidden, hidden, bias=bias)

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, hidden: torch.Tensor | None
    ) -> torch.Tensor:
        """``hidden`` [T] bool: tokens whose input is zeroed (padding-like), or None."""
        if hidden is not None:
            x = x * (~hidden).unsqueeze(-1).to(x.dtype)
        b, c, h = self.in_proj(x).chunk(3, dim=-1)
        bx = b * h
        weight = self.conv.weight[:, 0, :]  # [H, width]; column width-1 multiplies token t
        out = bx * weight[:, -1]
        for shift in range(1, self.width):
            # Token t reads token t - shift of its own sequence only (never across packing).
            previous = F.pad(bx[:-shift], (0, 0, shift, 0))
            inside = (positions >= shift).unsqueeze(-1).to(bx.dtype)
            out = out + previous * inside * weight[:, -1 - shift]
        if self.conv.bias is not None:
            out = out + self.conv.bias
        return self.out_proj(c * out)


class FeedForward(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        size = ffn_size(config)
        self.w1 = nn.Linear(config.hidden_size, size, bias=False)
        self.w3 = nn.Linear(config.hidden_size, size, bias=False)
        self.w2 = nn.Linear(size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Layer(nn.Module):
    def __init__(self, config, kind: str) -> None:
        super().__init__()
        self.is_attention = kind == ATTENTION
        if self.is_attention:
            self.self_attn = Attention(config)
        else:
            self.conv = ShortConv(config)
        self.feed_forward = FeedForward(config)
        self.operator_norm = RMSNorm(config.hidden_size, config.norm_eps, LFM2_RMS)
        self.ffn_norm = RMSNorm(config.hidden_size, config.norm_eps, LFM2_RMS)

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, batch: PackedSequences | None, rope
    ) -> torch.Tensor:
        normed = self.operator_norm(x)
        if self.is_attention:
            x = x + self.self_attn(normed, positions, batch, rope)
        else:
            x = x + self.conv(normed, positions, None if batch is None else batch.hidden)
        return x + self.feed_forward(self.ffn_norm(x))


@support_torch_compile(dynamic_arg_dims={"input_ids": 0, "positions": 0})
class Lfm2Encoder(nn.Module):
    def __init__(self, config, vllm_config=None, prefix: str = "") -> None:
        super().__init__()
        compat.refuse_quantization(vllm_config, "LFM2")
        compat.split_graph_at(vllm_config, ATTENTION_OP)
        kinds = layer_types(config)
        unknown = set(kinds) - {ATTENTION, CONV}
        if unknown:
            raise ValueError(f"unsupported LFM2 layer types {sorted(unknown)}")
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Layer(config, kind) for kind in kinds)
        self.embedding_norm = RMSNorm(config.hidden_size, config.norm_eps, LFM2_RMS)
        head_dim = getattr(config, "head_dim", None)
        head_dim = head_dim or config.hidden_size // config.num_attention_heads
        exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim
        inv_freq = 1.0 / (rope_theta(config) ** exponents)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)

    def rope(self, positions: torch.Tensor, dtype: torch.dtype):
        """``[T, 1, D]`` cos / sin, computed in fp32 like transformers."""
        freqs = positions.float()[:, None] * self.inv_freq.float()[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos().to(dtype).unsqueeze(1), angles.sin().to(dtype).unsqueeze(1)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Every key visible: compiled by vLLM, attention through the split-point op."""
        return self._encode(input_ids, positions, None)

    def forward_hidden_keys(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        hidden_keys: torch.Tensor | None,
    ) -> torch.Tensor:
        """``hidden_keys`` [T] bool: tokens no other token may attend to (or None). Eager,
        with the layout read once for every layer."""
        return self._encode(
            input_ids, positions, PackedSequences.from_positions(positions, hidden_keys)
        )

    def _encode(
        self, input_ids: torch.Tensor, positions: torch.Tensor, batch: PackedSequences | None
    ) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        rope = self.rope(positions, x.dtype)
        for layer in self.layers:
            x = layer(x, positions, batch, rope)
        return self.embedding_norm(x)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Copy ``Lfm2Model`` tensors by name (an optional ``model.`` prefix is stripped; the
        lm_head of an Lfm2ForCausalLM export is passed over). Each attention layer's
        ``q_proj`` / ``k_proj`` / ``v_proj`` load stacked into ``qkv_proj`` (one matmul)."""
        qkv = ("q_proj", "k_proj", "v_proj")
        return load_by_name(self, stack_tensors(weights, "qkv_proj", qkv))
