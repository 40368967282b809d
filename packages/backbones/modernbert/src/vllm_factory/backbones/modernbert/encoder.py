"""ModernBERT encoder from vLLM's parallel layers and vllm-factory kernels.

Weight names follow Hugging Face's ``ModernBertModel`` (``embeddings.tok_embeddings``,
``layers.N.attn.Wqkv``, ``layers.N.mlp.Wi``, ``final_norm``, ...), so a model package maps
checkpoint names onto this module with at most a prefix change.

Two paths over the same weights:

- ``forward(input_ids, positions)``: every key visible (documents, GLiNER prompts). Attention
  is vLLM's ``EncoderOnlyAttention`` (the backend vLLM picks for the device and dtype, with the
  sliding window), so vLLM compiles this path with ``torch.compile`` and replays it from
  piecewise CUDA graphs split at attention, as it does for its own encoders. Under compile the
  norms, GeGLU and RoPE are the kernels' PyTorch fallbacks, which Inductor fuses.
- ``forward_hidden_keys(input_ids, positions, hidden_keys)``: some tokens must stay invisible
  as keys (PyLate's hidden query expansion), which no vLLM attention backend can express. It
  runs eagerly with the packed attention layouts (``attention.py``).

fp32 on CUDA with the in-graph attention (below) turned off is the one exception: vLLM's fp32
attention backend there (``TRITON_ATTN``) multiplies in TF32, which moves served vectors past
float32 parity's tolerance (the GPU check), so such a model runs every batch through
our exact layouts, eagerly, as it did before this encoder compiled.

On CUDA engines with Triton usable (the default; ``VLLM_FACTORY_MODERNBERT_IN_GRAPH_ATTENTION=0``
in the server's environment turns it off), the attention of ``forward`` is ``attention_by_rows``
inside the compiled graph instead of vLLM's, each row's sequence (and sliding window) computed
from the positions on the device, so the whole encoder replays from one CUDA graph per step
size: no split point per layer, no attention metadata, less engine CPU a step (what bounds
ColBERT documents on a GPU), and fp32 compiles too (the kernel is exact in every dtype).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from vllm.compilation.decorators import support_torch_compile
from vllm.model_executor.layers.attention import EncoderOnlyAttention
from vllm.model_executor.layers.linear import (
    MergedColumnParallelLinear,
    QKVParallelLinear,
    RowParallelLinear,
)
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
from vllm_factory.backbones.modernbert.attention import attention_batch
from vllm_factory.backbones.modernbert.cuda_kernel import VarlenBatch
from vllm_factory.core import compat, envs
from vllm_factory.core.weights import load_by_name
from vllm_factory.kernels import (
    build_rope_cache,
    fused_add_layernorm,
    fused_geglu,
    fused_layernorm,
    fused_rope,
    in_graph_attention_switched,
    sequence_bounds,
    visible_ends,
    window_bounds,
)
from vllm_factory.kernels.packed_attention import LengthGroups, PackedBatch, packed_attention

vllm_ops = compat.custom_ops()  # vLLM's C++ / CUDA ops (rotary embedding, RMSNorm)

GLOBAL, LOCAL = "full_attention", "sliding_attention"

# vLLM's LoRA (``--enable-lora``) on this encoder: a model class that serves adapters gives
# this as its ``packed_modules_mapping``. Hugging Face's ModernBERT has one ``Linear`` for the
# fused ``Wqkv`` and one for ``Wi`` (GeGLU input and gate), so an adapter (PEFT on
# ``ModernBertModel``) has one LoRA pair for each; vLLM wraps a fused layer
# (``QKVParallelLinear``, ``MergedColumnParallelLinear``) only when the mapping lists it, here as
# itself: one LoRA over the whole output. ``Wo`` layers are plain row-parallel ones.
LORA_PACKED_MODULES: dict[str, list[str]] = {"Wqkv": ["Wqkv"], "Wi": ["Wi"]}

IN_GRAPH_ATTENTION = envs.MODERNBERT_IN_GRAPH_ATTENTION
IN_GRAPH_ATTENTION_ENV = IN_GRAPH_ATTENTION.name


def in_graph_attention_usable(vllm_config: Any) -> bool:
    """Whether ``forward`` attends in graph (the kernels' ``ROWS_OP``): on a CUDA engine with
    Triton usable, unless ``VLLM_FACTORY_MODERNBERT_IN_GRAPH_ATTENTION=0``. GPU-checked (H200,
    fp32 / bf16, with and without async scheduling: moderncolbert, mmbert_gliner and its
    bi-encoder) and faster than vLLM's attention at every load benchmarked (the backbone's
    README)."""
    return in_graph_attention_switched(IN_GRAPH_ATTENTION, compat.device_type(vllm_config))


def compiles(vllm_config: Any) -> bool:
    """``enable_if`` of the encoder's compile: in an engine, with vLLM's attention
    (:func:`compat.compiles_with_vllm_attention`) or the in-graph one (exact in every dtype)."""
    return compat.compiles_with_vllm_attention(vllm_config) or (
        compat.compiles_in_engine(vllm_config) and in_graph_attention_usable(vllm_config)
    )


@dataclass
class RowBounds:
    """Each row's key range per layer type (the sequence; the band on sliding-window
    layers), computed on the device once per forward."""

    bounds: dict[str, tuple[torch.Tensor, torch.Tensor]]
    max_seqlen: int

    @classmethod
    def from_positions(
        cls,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        half_windows: dict[str, int | None],
        max_seqlen: int,
        hidden_token: int | None = None,
    ) -> RowBounds:
        """``hidden_token``: each sequence's trailing run of it is no row's key
        (:func:`visible_ends`)."""
        start, end = sequence_bounds(positions)
        if hidden_token is not None:
            end = visible_ends(input_ids, positions, end, hidden_token)
        bounds = {
            kind: (start, end) if half is None else window_bounds(start, end, half)
            for kind, half in half_windows.items()
        }
        return cls(bounds, max_seqlen)


AttentionLayout = PackedBatch | LengthGroups | VarlenBatch | RowBounds


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


class Rotary(nn.Module):
    """RoPE tables of one theta, made once on the device the model is built on: fp32 cos / sin
    halves for ``fused_rope``, and ``cat(cos, sin)`` in the model dtype for vLLM's CPU rotary
    op, which requires the cache dtype to equal the query dtype."""

    def __init__(self, max_positions: int, head_dim: int, theta: float) -> None:
        super().__init__()
        cos, sin = build_rope_cache(max_positions, head_dim, theta)
        cos_sin = torch.cat((cos, sin), dim=-1).to(torch.get_default_dtype()).contiguous()
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("cos_sin", cos_sin, persistent=False)


class Embeddings(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.tok_embeddings = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.norm = LayerNorm(config.hidden_size, norm_eps(config), config.norm_bias)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.norm(self.tok_embeddings(input_ids))


class Attention(nn.Module):
    def __init__(
        self, config, layer_type: str, prefix: str = "", vllm_attention: bool = True,
        quant_config: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // self.num_heads
        self.scale = self.head_dim**-0.5
        hidden, bias = config.hidden_size, config.attention_bias
        self.Wqkv = QKVParallelLinear(
            hidden, self.head_dim, self.num_heads, bias=bias, quant_config=quant_config,
            prefix=f"{prefix}.Wqkv",
        )  # fmt: skip
        self.Wo = RowParallelLinear(
            hidden, hidden, bias=bias, quant_config=quant_config, prefix=f"{prefix}.Wo"
        )
        # HF masks keys farther than local_attention // 2 on sliding-window layers.
        self.half_window = config.local_attention // 2 if layer_type == LOCAL else None
        self.layer_type = layer_type
        # vLLM's window excludes |query - key| == window; ModernBERT's band includes half_window.
        window = None if self.half_window is None else self.half_window + 1
        self.attn = None
        if vllm_attention:
            self.attn = EncoderOnlyAttention(
                self.Wqkv.num_heads,  # this rank's heads under TP
                self.head_dim,
                self.scale,
                prefix=f"{prefix}.attn",
                per_layer_sliding_window=window,
            )

    def rotate(self, qkv: torch.Tensor, positions: torch.Tensor, rope: Rotary):
        """``q, k, v`` as ``[T, heads, head_dim]``, q and k rotated."""
        tokens = qkv.shape[0]
        heads = qkv.shape[1] // (3 * self.head_dim)
        if qkv.is_cuda or torch.compiler.is_compiling():
            q, k, v = qkv.view(tokens, 3, heads, self.head_dim).unbind(1)
            q, k = fused_rope(q, k, positions, rope.cos, rope.sin)
            return q, k, v
        # Eager on CPU, vLLM's C++ rotary op (in place, on views of qkv) beats the PyTorch
        # fallback several times over; same rotate-half math, same fp32 angles.
        width = heads * self.head_dim
        q_flat, k_flat = qkv[:, :width], qkv[:, width : 2 * width]
        vllm_ops.rotary_embedding(positions, q_flat, k_flat, self.head_dim, rope.cos_sin, True)
        return qkv.view(tokens, 3, heads, self.head_dim).unbind(1)

    def forward(
        self,
        hidden_states: torch.Tensor,
        positions: torch.Tensor,
        rope: Rotary,
        layout: AttentionLayout | None = None,
    ) -> torch.Tensor:
        """``layout`` None: vLLM's attention (every key visible); :class:`RowBounds`: the
        in-graph attention; else our packed attention."""
        qkv, _ = self.Wqkv(hidden_states)
        q, k, v = self.rotate(qkv, positions, rope)
        if layout is None:
            out = self.attn(q.flatten(1), k.flatten(1), v.flatten(1))
        elif isinstance(layout, RowBounds):
            start, end = layout.bounds[self.layer_type]
            rows = torch.empty_like(q)
            torch.ops.vllm_factory.attention_by_rows(
                q, k, v, start, end, layout.max_seqlen, self.scale, None, None, rows
            )
            out = rows.flatten(1)
        else:
            out = packed_attention(q, k, v, layout, self.scale, self.half_window)
        return self.Wo(out)[0]


class MLP(nn.Module):
    def __init__(self, config, prefix: str = "", quant_config: Any = None) -> None:
        super().__init__()
        hidden, inner, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        # Wi holds the GeGLU input and gate halves: [hidden] -> [2 * inner].
        self.Wi = MergedColumnParallelLinear(
            hidden, [inner, inner], bias=bias, quant_config=quant_config, prefix=f"{prefix}.Wi"
        )
        self.Wo = RowParallelLinear(
            inner, hidden, bias=bias, quant_config=quant_config, prefix=f"{prefix}.Wo"
        )
        self.approximate = "tanh" if "tanh" in str(config.hidden_activation) else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.Wo(fused_geglu(self.Wi(x)[0], self.approximate))[0]


class Layer(nn.Module):
    def __init__(
        self, config, index: int, layer_type: str, prefix: str = "", vllm_attention: bool = True,
        quant_config: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        eps, bias = norm_eps(config), config.norm_bias
        # Layer 0 reads the (already normalised) embeddings directly.
        self.attn_norm = nn.Identity() if index == 0 else LayerNorm(config.hidden_size, eps, bias)
        self.attn = Attention(config, layer_type, f"{prefix}.attn", vllm_attention, quant_config)
        self.mlp_norm = LayerNorm(config.hidden_size, eps, bias)
        self.mlp = MLP(config, f"{prefix}.mlp", quant_config)

    def forward(self, hidden_states, positions, rope, layout=None) -> torch.Tensor:
        attn_out = self.attn(self.attn_norm(hidden_states), positions, rope, layout)
        normed, hidden_states = self.mlp_norm.add_and_norm(attn_out, hidden_states)
        return hidden_states + self.mlp(normed)


@support_torch_compile(dynamic_arg_dims={"input_ids": 0, "positions": 0}, enable_if=compiles)
class ModernBertEncoder(nn.Module):
    """Embeddings -> N layers -> final norm, on vLLM's packed ``[T]`` token batch."""

    def __init__(self, config, vllm_config: Any = None, prefix: str = "") -> None:
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        types = layer_types(config)
        # ``rows_max_seqlen`` > 0: ``forward`` attends in graph (module docstring), for
        # sequences of at most that many tokens.
        self.rows_max_seqlen = 0
        self.hidden_tail_id: int | None = None  # hide_trailing_keys
        if in_graph_attention_usable(vllm_config):
            longest = getattr(vllm_config.model_config, "max_model_len", None)
            self.rows_max_seqlen = min(longest or config.max_position_embeddings,
                                       config.max_position_embeddings)  # fmt: skip
        # vLLM builds the model with its dtype and device as torch's defaults.
        device = torch.get_default_device().type
        self.vllm_attention = not (
            self.rows_max_seqlen or compat.exact_attention_needed(torch.get_default_dtype(), device)
        )
        if vllm_config is not None:
            attention = (
                "rows" if self.rows_max_seqlen else "vllm" if self.vllm_attention else "eager"
            )
            compat.add_compile_key(vllm_config, modernbert_attention=attention)
        quant_config = compat.quant_config(vllm_config)
        self.layers = nn.ModuleList(
            Layer(config, i, types[i], f"{prefix}.layers.{i}", self.vllm_attention, quant_config)
            for i in range(config.num_hidden_layers)
        )
        # Each layer type's half window (None: global), for the in-graph attention's bounds.
        self.half_windows = {layer.attn.layer_type: layer.attn.half_window for layer in self.layers}
        self.final_norm = LayerNorm(config.hidden_size, norm_eps(config), config.norm_bias)
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.rope = nn.ModuleDict(
            {
                t: Rotary(config.max_position_embeddings, self.head_dim, rope_theta(config, t))
                for t in sorted(set(types))
            }
        )

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embeddings.tok_embeddings(input_ids)

    def forward(self, input_ids: Tensor, positions: Tensor) -> Tensor:
        """Every key visible: on CUDA (by default) the in-graph attention; elsewhere vLLM's
        attention, compiled and graph-captured by vLLM (fp32 on CUDA with the in-graph
        attention off: our exact layouts, eagerly)."""
        if self.rows_max_seqlen:
            return self._encode(input_ids, positions, self.row_bounds(input_ids, positions))
        if not self.vllm_attention:
            return self.forward_hidden_keys(input_ids, positions, None)
        return self._encode(input_ids, positions, None)

    def hide_trailing_keys(self, token_id: int) -> bool:
        """Hide each sequence's trailing run of ``token_id`` (never its first token) from
        every row in ``forward``, on the device (PyLate's hidden query expansion, with no host
        sync per step); True where this encoder does, i.e. on the in-graph path. Elsewhere the
        caller finds such keys itself and calls :meth:`forward_hidden_keys`."""
        if not self.rows_max_seqlen:
            return False
        self.hidden_tail_id = token_id
        return True

    def row_bounds(self, input_ids: Tensor, positions: Tensor) -> RowBounds:
        """The in-graph attention's key ranges for this batch (device operations only)."""
        return RowBounds.from_positions(
            input_ids, positions, self.half_windows, self.rows_max_seqlen, self.hidden_tail_id
        )

    def forward_hidden_keys(
        self, input_ids: Tensor, positions: Tensor, hidden_keys: Tensor | None
    ) -> Tensor:
        """``hidden_keys`` [T] bool: tokens no other token may attend to. Eager, with our
        attention layouts."""
        dtype = self.embeddings.norm.weight.dtype
        layout = attention_batch(positions, hidden_keys, self.head_dim, dtype)
        return self._encode(input_ids, positions, layout)

    def _encode(
        self, input_ids: Tensor, positions: Tensor, layout: AttentionLayout | None
    ) -> Tensor:
        hidden_states = self.embeddings(input_ids)
        for layer in self.layers:
            rope = self.rope[layer.attn.layer_type]
            hidden_states = layer(hidden_states, positions, rope, layout)
        return self.final_norm(hidden_states)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load Hugging Face ``ModernBertModel`` names (optionally prefixed ``model.``; an MLM
        head is passed over)."""
        return load_by_name(self, weights)
