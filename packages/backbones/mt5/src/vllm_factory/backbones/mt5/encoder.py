"""mT5 / T5 encoder stack from vLLM's parallel layers, on vLLM's packed token batch.

Shared token embedding (not scaled) -> N pre-norm blocks (RMS norm, unscaled self-attention
with the relative position bias of the first block, RMS norm, feed-forward) -> final RMS
norm. Dropout is ignored (inference only). Weight names are mapped from Hugging Face's
``T5EncoderModel`` / ``MT5EncoderModel`` (also accepted inside a full T5 checkpoint, or behind
a prefix the caller names) in ``load_weights``.

Compiled by vLLM (``support_torch_compile``, inside an engine). On CPU engines (and on CUDA
with the in-graph attention below turned off) attention, which needs the sequence layout, is
the torch custom op ``vllm_factory::t5_attention`` (``vllm_factory.kernels.t5_attention``),
added to vLLM's splitting ops. vLLM splits
the graph there, replays the rest (norms, projections, feed-forward) from piecewise CUDA graphs
and runs the op eagerly between them: it groups the sequences and builds their bias masks once
per step (shared by every layer, as T5 shares the bias) and writes into an output buffer the
graph allocated. Padding that vLLM adds for a CUDA graph has position 0: each padding token is
a sequence of its own.

On CUDA engines with Triton usable (the default; ``VLLM_FACTORY_MT5_IN_GRAPH_ATTENTION=0`` in
the server's environment turns it off), the attention stays inside the compiled graph instead
(``vllm-factory-kernels``' ``attention_by_rows`` op with the bias by relative distance). Each
row's key range comes from the positions on the device and the bias from the table by
distance, so nothing is read on the host: no split point, no per-step grouping, one CUDA graph
a step size.

fp16: T5 activations are known to overflow fp16 (mT5 especially); Hugging Face clamps the
residual stream to the fp16 range after each sublayer, and so do we in fp16. We serve fp32
and bf16, where none of this applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from vllm.compilation.decorators import support_torch_compile
from vllm.distributed import get_tensor_model_parallel_rank, get_tensor_model_parallel_world_size
from vllm.model_executor.layers.linear import (
    ColumnParallelLinear,
    MergedColumnParallelLinear,
    QKVParallelLinear,
    RowParallelLinear,
)
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
from vllm_factory.core import compat, envs
from vllm_factory.core.weights import load_by_name
from vllm_factory.kernels import (
    fused_geglu,
    in_graph_attention_switched,
    sequence_bounds,
)
from vllm_factory.kernels.packed_step_cache import cache_layouts_per_step
from vllm_factory.kernels.t5_attention import T5_ATTENTION_OP
from vllm_factory.kernels.t5_position_bias import relative_position_bucket

vllm_ops = compat.custom_ops()  # vLLM's C++ / CUDA ops (rotary embedding, RMSNorm)
# The split-point op's layout, read once per model step (vLLM's forward context).
cache_layouts_per_step(compat.step_cached)

_ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "swish": F.silu,
}
_GELU_APPROXIMATION = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}


def feed_forward_kind(config) -> tuple[bool, str]:
    """(gated, activation name) from ``feed_forward_proj``, read as Hugging Face reads it."""
    proj = str(getattr(config, "feed_forward_proj", "relu"))
    parts = proj.split("-")
    gated = len(parts) == 2 and parts[0] == "gated"
    act = "gelu_new" if proj == "gated-gelu" else parts[-1]
    if len(parts) > 2 or (len(parts) == 2 and not gated) or act not in _ACTIVATIONS:
        raise ValueError(f"unsupported feed_forward_proj {proj!r}")
    return gated, act


def lora_packed_modules(config) -> dict[str, list[str]]:
    """vLLM's LoRA (``--enable-lora``) on this encoder: a model class that serves adapters
    gives this as its ``packed_modules_mapping``. Hugging Face's T5 has separate ``q``, ``k``,
    ``v`` and, gated, ``wi_0`` / ``wi_1`` layers, each with its own LoRA pair in a PEFT adapter;
    here they are fused (``qkv``, ``wi``), and vLLM wraps a fused layer only when the mapping
    lists its parts: one LoRA slice per part. A non-gated ``wi`` is one layer (not listed)."""
    packed = {"qkv": ["q", "k", "v"]}
    if feed_forward_kind(config)[0]:
        packed["wi"] = ["wi_0", "wi_1"]
    return packed


def _clamp_fp16(x: torch.Tensor) -> torch.Tensor:
    """Hugging Face's fp16 guard: pull infinities back into the fp16 range."""
    top = torch.finfo(torch.float16).max
    limit = torch.where(torch.isinf(x).any(), top - 1000, top)
    return torch.clamp(x, min=-limit, max=limit)


class RMSNorm(nn.Module):
    """T5's layer norm: scale only, no mean subtraction, no bias; variance in fp32."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float16:  # the Hugging Face arithmetic, for its fp16 clamping
            variance = x.float().pow(2).mean(-1, keepdim=True)
            return self.weight * (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype)
        out = torch.empty_like(x)
        vllm_ops.rms_norm(out, x.contiguous(), self.weight, self.eps)
        return out

    def add_and_norm(
        self, x: torch.Tensor, residual: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(norm(residual + x), residual + x)``; may overwrite both inputs."""
        if x.dtype == torch.float16:
            residual = _clamp_fp16(residual + x)
            return self(residual), residual
        vllm_ops.fused_add_rms_norm(x, residual, self.weight, self.eps)  # in place
        return x, residual


ATTENTION_OP = T5_ATTENTION_OP
IN_GRAPH_ATTENTION = envs.MT5_IN_GRAPH_ATTENTION
IN_GRAPH_ATTENTION_ENV = IN_GRAPH_ATTENTION.name


def in_graph_attention_usable(vllm_config: Any) -> bool:
    """Whether ``forward`` attends in graph (the kernels' ``ROWS_OP``): on a CUDA engine with
    Triton usable, unless ``VLLM_FACTORY_MT5_IN_GRAPH_ATTENTION=0``. GPU-checked (H200, fp32 /
    bf16, with and without async scheduling) and faster than the split point at the
    mt5_gliner peak (the backbone's README)."""
    return in_graph_attention_switched(IN_GRAPH_ATTENTION, compat.device_type(vllm_config))


@dataclass
class RowsBias:
    """What the in-graph attention needs, made once per forward: each row's key range and the
    ``[local heads, buckets]`` bias table with the distance -> bucket index."""

    start: torch.Tensor
    end: torch.Tensor
    table: torch.Tensor
    index: torch.Tensor
    max_seqlen: int


class Attention(nn.Module):
    def __init__(self, config, prefix: str = "", quant_config: Any = None) -> None:
        super().__init__()
        self.head_dim = config.d_kv  # T5: inner_dim = heads * d_kv need not be d_model
        inner = config.num_heads * config.d_kv
        self.qkv = QKVParallelLinear(
            config.d_model, self.head_dim, config.num_heads, bias=False,
            quant_config=quant_config, prefix=f"{prefix}.qkv",
        )  # fmt: skip
        self.o = RowParallelLinear(
            inner, config.d_model, bias=False, quant_config=quant_config, prefix=f"{prefix}.o"
        )

    def forward(
        self, hidden_states: torch.Tensor, positions: torch.Tensor, bias: tuple | RowsBias
    ) -> torch.Tensor:
        """``bias``: the split-point op's ``(table, num_buckets, max_distance, first_head,
        min_fill)``, or :class:`RowsBias` for the in-graph attention."""
        qkv, _ = self.qkv(hidden_states)
        heads = qkv.shape[1] // (3 * self.head_dim)  # this rank's heads
        q, k, v = qkv.view(-1, 3, heads, self.head_dim).unbind(1)
        out = q.new_empty(q.shape)
        if isinstance(bias, RowsBias):
            torch.ops.vllm_factory.attention_by_rows(  # unscaled, as T5
                q, k, v, bias.start, bias.end, bias.max_seqlen, 1.0, bias.table, bias.index, out
            )
        else:
            torch.ops.vllm_factory.t5_attention(q, k, v, positions, *bias, out)
        return self.o(out.view(out.shape[0], -1))[0]


class FeedForward(nn.Module):
    def __init__(self, config, prefix: str = "", quant_config: Any = None) -> None:
        super().__init__()
        self.gated, act = feed_forward_kind(config)
        d_model, d_ff = config.d_model, config.d_ff
        linear = {"bias": False, "quant_config": quant_config}
        if self.gated:  # wi_0 (activated) and wi_1 as the two halves of one projection
            self.wi = MergedColumnParallelLinear(
                d_model, [d_ff, d_ff], **linear, prefix=f"{prefix}.wi"
            )
        else:
            self.wi = ColumnParallelLinear(d_model, d_ff, **linear, prefix=f"{prefix}.wi")
        self.wo = RowParallelLinear(d_ff, d_model, **linear, prefix=f"{prefix}.wo")
        self.act = _ACTIVATIONS[act]
        self.gelu_approximation = _GELU_APPROXIMATION.get(act) if self.gated else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.wi(x)[0]
        if self.gelu_approximation is not None:
            h = fused_geglu(h, self.gelu_approximation)
        elif self.gated:
            gate, up = h.chunk(2, dim=-1)
            h = self.act(gate) * up
        else:
            h = self.act(h)
        return self.wo(h)[0]


class Block(nn.Module):
    def __init__(self, config, prefix: str = "", quant_config: Any = None) -> None:
        super().__init__()
        eps = config.layer_norm_epsilon
        self.attn_norm = RMSNorm(config.d_model, eps)
        self.attn = Attention(config, f"{prefix}.attn", quant_config)
        self.ff_norm = RMSNorm(config.d_model, eps)
        self.ff = FeedForward(config, f"{prefix}.ff", quant_config)


# Hugging Face encoder names (after the prefix) -> (our parameter, shard id)
_BLOCK = r"encoder\.block\.(\d+)\.layer\."
_NAME_MAP: list[tuple[re.Pattern[str], str, str | int | None]] = [
    (re.compile(r"(?:shared|encoder\.embed_tokens)\.weight"), "shared.weight", None),
    (re.compile(_BLOCK + r"0\.SelfAttention\.([qkv])\.weight"), r"blocks.\1.attn.qkv.weight", 2),
    (re.compile(_BLOCK + r"0\.SelfAttention\.o\.weight"), r"blocks.\1.attn.o.weight", None),
    (
        re.compile(r"encoder\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.weight"),
        "relative_attention_bias.weight",
        None,
    ),
    (re.compile(_BLOCK + r"0\.layer_norm\.weight"), r"blocks.\1.attn_norm.weight", None),
    (re.compile(_BLOCK + r"1\.layer_norm\.weight"), r"blocks.\1.ff_norm.weight", None),
    (re.compile(_BLOCK + r"1\.DenseReluDense\.wi_([01])\.weight"), r"blocks.\1.ff.wi.weight", 2),
    (re.compile(_BLOCK + r"1\.DenseReluDense\.wi\.weight"), r"blocks.\1.ff.wi.weight", None),
    (re.compile(_BLOCK + r"1\.DenseReluDense\.wo\.weight"), r"blocks.\1.ff.wo.weight", None),
    (re.compile(r"encoder\.final_layer_norm\.weight"), "final_norm.weight", None),
]


def map_hf_name(name: str) -> tuple[str, str | int | None] | None:
    """Our parameter name and shard id for a Hugging Face encoder weight name (no prefix),
    or None for weights the encoder does not use (decoder, LM head, ...)."""
    for pattern, target, shard_group in _NAME_MAP:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        shard = None
        if shard_group is not None:
            shard = match.group(shard_group)
            shard = int(shard) if shard.isdigit() else shard
        return match.expand(target), shard
    return None


@support_torch_compile(
    dynamic_arg_dims={"input_ids": 0, "positions": 0, "inputs_embeds": 0},
    enable_if=compat.compiles_in_engine,
)
class MT5Encoder(nn.Module):
    """Embedding -> N blocks -> final norm, on vLLM's packed ``[T]`` token batch."""

    def __init__(self, config, vllm_config=None, prefix: str = "") -> None:
        super().__init__()
        self.config = config
        self.num_buckets = config.relative_attention_num_buckets
        self.max_distance = getattr(config, "relative_attention_max_distance", 128)
        # ``rows_max_seqlen`` > 0: ``forward`` attends in graph (module docstring).
        self.rows_max_seqlen = 0
        if in_graph_attention_usable(vllm_config):
            self.rows_max_seqlen = vllm_config.model_config.max_model_len
            # The bucket of each distance i - j (T5's key - query is j - i) for |i - j| up to
            # max_distance; buckets stop changing past it, and the kernel clamps farther ones.
            distance = torch.arange(-self.max_distance, self.max_distance + 1)
            buckets = relative_position_bucket(-distance, self.num_buckets, self.max_distance)
            self.register_buffer("bias_index", buckets.to(torch.int32), persistent=False)
        else:
            compat.split_graph_at(vllm_config, ATTENTION_OP)
        if vllm_config is not None:
            attention = "rows" if self.rows_max_seqlen else "split"
            compat.add_compile_key(vllm_config, mt5_attention=attention)
        self.shared = VocabParallelEmbedding(config.vocab_size, config.d_model)
        # T5 keeps the table in block 0 and shares its bias with every block; replicated
        # here, each tensor-parallel rank reads its own heads' columns.
        self.relative_attention_bias = nn.Embedding(self.num_buckets, config.num_heads)
        self.blocks = nn.ModuleList(
            Block(config, f"{prefix}.blocks.{i}", compat.quant_config(vllm_config))
            for i in range(config.num_layers)
        )
        self.final_norm = RMSNorm(config.d_model, config.layer_norm_epsilon)
        tp_size = get_tensor_model_parallel_world_size()
        self.local_heads = config.num_heads // tp_size
        first = get_tensor_model_parallel_rank() * self.local_heads
        self._heads = slice(first, first + self.local_heads)
        self.min_fill: float | None = None  # grouping policy; None: per device (attention.py)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.shared(input_ids)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[T]`` packed ids (whole sequences, each from position 0) -> ``[T, d_model]``."""
        if inputs_embeds is None:
            residual = self.shared(input_ids)
        else:
            residual = inputs_embeds.clone()  # the residual stream is updated in place
        table = self.relative_attention_bias.weight
        if self.rows_max_seqlen:
            start, end = sequence_bounds(positions)
            local = table[:, self._heads].t().contiguous()
            bias = RowsBias(start, end, local, self.bias_index, self.rows_max_seqlen)
        else:
            bias = (table, self.num_buckets, self.max_distance, self._heads.start, self.min_fill)
        hidden = self.blocks[0].attn_norm(residual)
        norms = [*(block.attn_norm for block in self.blocks[1:]), self.final_norm]
        for block, next_norm in zip(self.blocks, norms):
            attn = block.attn(hidden, positions, bias)
            hidden, residual = block.ff_norm.add_and_norm(attn, residual)
            hidden, residual = next_norm.add_and_norm(block.ff(hidden), residual)
        return hidden

    def load_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]],
        prefixes: Sequence[str] = (),
    ) -> set[str]:
        """Load Hugging Face ``(M)T5EncoderModel`` names, bare or behind one of ``prefixes``
        (a model wrapping the encoder strips its own prefix first, as GLiNER's does). Anything
        else (decoder, LM head, blocks beyond ``num_layers``) is passed over; parameters the
        checkpoint lacks are logged. Returns the names of our parameters that were loaded."""
        return load_by_name(self, weights, prefixes=prefixes, rename=map_hf_name)
