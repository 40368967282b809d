"""DeBERTa-v2/v3 encoder from vLLM's parallel layers and vllm-factory kernels.

Module and parameter names follow Hugging Face's ``DebertaV2Model`` (``embeddings.*``,
``encoder.rel_embeddings``, ...), so loading is a prefix strip, except the attention's query /
key / value layers: one packed ``qkv_proj`` here, their weights loaded as its shards. Input and
output are vLLM's flat packed batch: ``input_ids`` / ``positions`` of ``[T]`` and hidden states
``[T, hidden]``; every sequence starts where its position is 0. Attention is
``flash_deberta_attention`` (Triton on CUDA, the PyTorch fallback elsewhere).

Compiled by vLLM (``support_torch_compile``, inside an engine): everything that needs the
sequence layout (attention and DeBERTa-v2's convolution) is a torch custom op,
``vllm_factory::deberta_attention`` / ``vllm_factory::deberta_conv`` (registered by
``vllm_factory.kernels.deberta_ops``), added to vLLM's splitting ops. vLLM splits the graph there, replays the projections, norms and MLPs from
piecewise CUDA graphs, and runs the ops eagerly between them: they read the layout from the
positions once per step (shared by every layer) and write into an output buffer the graph
allocated. When vLLM pads a batch for a CUDA graph, the padding tokens have position 0, so
each is a sequence of its own and no real sequence reads them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from vllm.compilation.decorators import support_torch_compile
from vllm.model_executor.layers.linear import (
    ColumnParallelLinear,
    QKVParallelLinear,
    RowParallelLinear,
    UnquantizedLinearMethod,
)
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
from vllm_factory.core import compat, envs
from vllm_factory.core.weights import load_by_name
from vllm_factory.kernels import (
    fused_add_layernorm,
    fused_layernorm,
    in_graph_attention_switched,
    packed_step_cache,
    relative_position_index,
    relative_scores,
    sequence_bounds,
)
from vllm_factory.kernels.deberta_ops import ATTENTION_OP, CONV_OP

logger = logging.getLogger(__name__)

# Where checkpoints keep a DebertaV2Model: HF task heads (``deberta.``), wrappers (``model.``).
# Tried in order after the bare name; a model whose checkpoint nests the encoder deeper (GLiNER,
# GLiNER2) strips its own prefix first.
WEIGHT_PREFIXES: tuple[str, ...] = ("deberta.", "model.")

# vLLM's LoRA (``--enable-lora``) on this encoder: a model class that serves adapters gives this
# as its ``packed_modules_mapping``. A PEFT adapter has a LoRA pair per Hugging Face layer; vLLM
# wraps the packed layer only when the mapping lists its parts, one LoRA slice per part.
LORA_PACKED_MODULES: dict[str, list[str]] = {"qkv_proj": ["query_proj", "key_proj", "value_proj"]}
_QKV_SHARDS = {"query_proj": "q", "key_proj": "k", "value_proj": "v"}


def packed_name(name: str) -> tuple[str, str | None]:
    """A Hugging Face parameter name -> ours and the ``qkv_proj`` shard it fills (else ``None``)."""
    pieces = name.split(".")
    if len(pieces) >= 2 and pieces[-2] in _QKV_SHARDS:
        shard = _QKV_SHARDS[pieces[-2]]
        return ".".join([*pieces[:-2], "qkv_proj", pieces[-1]]), shard
    return name, None


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
    "tanh": torch.tanh,
}


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    fn = _ACTIVATIONS.get(str(name).lower())
    if fn is None:
        raise ValueError(f"unsupported DeBERTa activation {name!r}; known: {sorted(_ACTIVATIONS)}")
    return fn


def relative_positions(config) -> tuple[int, int, int]:
    """``(span, position_buckets, max_relative_positions)`` as HF reads them; span 0 without
    relative attention."""
    max_rel = getattr(config, "max_relative_positions", -1)
    max_rel = max_rel if max_rel >= 1 else config.max_position_embeddings
    buckets = getattr(config, "position_buckets", -1)
    span = 0
    if getattr(config, "relative_attention", False):
        span = buckets if buckets > 0 else max_rel
    return span, buckets, max_rel


# The ops (vllm_factory::deberta_attention / deberta_conv, the split points, and
# vllm_factory::deberta_attention_rows, in the graph) live in the kernels wheel; the layout the
# split points read from the positions is kept for one model step on vLLM's forward context.
packed_step_cache.cache_layouts_per_step(compat.step_cached)


# On by default on CUDA engines, "0" turns it off (the attention is then a split point). GPU-
# checked with every DeBERTa package (deberta_gliner and its bi-encoder, gliner2; H200, fp32
# and bf16; docs/benchmarks/h200/2026-11-29-c17301b-gpu-check-gliner-opt-ins) and faster than
# the split point at every load of the deberta_gliner benchmarks, most with
# --async-scheduling (docs/benchmarks/deberta_gliner.md).
IN_GRAPH_ATTENTION = envs.DEBERTA_IN_GRAPH_ATTENTION
IN_GRAPH_ATTENTION_ENV = IN_GRAPH_ATTENTION.name


def rows_attention_usable(vllm_config: Any) -> bool:
    """Whether the in-graph attention (``vllm_factory::deberta_attention_rows``) serves this
    engine: on a CUDA device with Triton usable, unless
    ``VLLM_FACTORY_DEBERTA_IN_GRAPH_ATTENTION=0``; otherwise (and on CPU engines, with
    ``VLLM_FACTORY_DISABLE_TRITON=1``, outside an engine) the attention is a split point that
    reads the layout on the host."""
    return in_graph_attention_switched(IN_GRAPH_ATTENTION, compat.device_type(vllm_config))


@dataclass
class RowBounds:
    """Per-row sequence bounds for the in-graph attention, made once per forward."""

    start: torch.Tensor
    end: torch.Tensor
    rel_index: torch.Tensor | None
    max_seqlen: int


class LayerNorm(nn.Module):
    """LayerNorm with bias through the fused kernel (DeBERTa's eps is 1e-7)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_layernorm(x, self.weight, self.bias, self.eps)

    def add_and_norm(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return fused_add_layernorm(x, residual, self.weight, self.bias, self.eps)[0]


class Embeddings(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.embedding_size = getattr(config, "embedding_size", None) or hidden
        self.word_embeddings = VocabParallelEmbedding(config.vocab_size, self.embedding_size)
        self.position_embeddings = None
        if getattr(config, "position_biased_input", True):
            self.position_embeddings = nn.Embedding(
                config.max_position_embeddings, self.embedding_size
            )
        self.token_type_embeddings = None
        if config.type_vocab_size > 0:
            # vLLM passes no token types: HF's default (all zeros) adds row 0 to every token.
            self.token_type_embeddings = nn.Embedding(config.type_vocab_size, self.embedding_size)
        self.embed_proj = None
        if self.embedding_size != hidden:
            self.embed_proj = nn.Linear(self.embedding_size, hidden, bias=False)
        self.LayerNorm = LayerNorm(hidden, config.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.word_embeddings(input_ids)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(positions.long())
        if self.token_type_embeddings is not None:
            x = x + self.token_type_embeddings.weight[0]
        if self.embed_proj is not None:
            x = self.embed_proj(x)
        return self.LayerNorm(x)


def base_projection(proj: nn.Module, rel: torch.Tensor) -> torch.Tensor:
    """``proj``'s own weights on the relative rows, without the LoRA adapters vLLM may have
    wrapped it with: those act per token (:func:`projected_relative_scores`), and the rows are
    not tokens, so the wrapper's forward (which maps rows to tokens) cannot project them."""
    return getattr(proj, "base_layer", proj)(rel)[0]


def loaded_projection(proj: nn.Module, rel: torch.Tensor) -> torch.Tensor:
    """:func:`base_projection` from the weights as loaded, before vLLM's loader hands the layer
    to its quantization method (which may repack or drop them: vLLM CPU's gemm dispatch)."""
    base = getattr(proj, "base_layer", proj)
    return F.linear(rel, base.weight, base.bias)


def unquantized(proj: nn.Module) -> bool:
    return isinstance(getattr(proj, "quant_method", None), UnquantizedLinearMethod)


def projected_relative_scores(
    x: torch.Tensor, pos: torch.Tensor, proj: nn.Module, rel: torch.Tensor, part: int
) -> torch.Tensor:
    """``relative_scores(x, proj(rel))``: ``x`` [T, H, D] tokens, ``rel`` [2S, hidden] the
    relative embeddings, ``pos`` [2S, H, D] their projection by ``proj``'s base weights (the
    token's own key / query projection when the model shares them: slice ``part`` of the
    packed ``qkv_proj``; else ``pos_key_proj`` / ``pos_query_proj``, slice 0).

    Under vLLM's LoRA (``proj`` wrapped by one of its LoRA layers: ``lora_a_stacked`` /
    ``lora_b_stacked`` per packed slice and adapter slot, the batch's slot per token on
    ``punica_wrapper``), the relative rows are projected per token by that token's adapter, as
    the library's LoRA model does for a single adapter: the adapters' part is added through
    the rank-space factors, for every slot at once (no data-dependent branch),
    ``x_t . (B_s A_s rel_r)`` = ``(x_t B_s) . (A_s rel_r)`` summed over the rank, with ``s``
    the token's slot (none: no term).
    """
    scores = relative_scores(x, pos)
    lora_a = getattr(proj, "lora_a_stacked", None)
    if lora_a is None:
        return scores
    a = lora_a[part][:, 0].to(x.dtype)  # [slots, rank, hidden] (vLLM folds the scaling into B)
    b = proj.lora_b_stacked[part][:, 0].to(x.dtype)  # [slots, H * D, rank]
    slots, rank = a.shape[0], a.shape[1]
    tokens = x.shape[0]
    # The wrapper's per-token slot buffer, cut to this batch's rows by their count (not by the
    # public ``token_lora_indices``, which cuts by a host-side length a compiled graph would
    # freeze); rows past the scheduled tokens are padding, whatever they hold.
    index = proj.punica_wrapper._token_lora_indices[:tokens]
    chosen = index.unsqueeze(1) == torch.arange(slots, device=x.device)  # [T, slots]
    rel_rank = torch.einsum("ri,ski->rsk", rel.to(x.dtype), a).reshape(rel.shape[0], -1)
    x_rank = torch.einsum("thd,shdk->thsk", x, b.view(slots, x.shape[1], x.shape[2], rank))
    x_rank = (x_rank * chosen[:, None, :, None].to(x.dtype)).reshape(tokens, x.shape[1], -1)
    return scores + torch.einsum("thm,rm->htr", x_rank, rel_rank)


class SelfAttention(nn.Module):
    """One packed ``qkv_proj`` (Hugging Face's ``query_proj`` / ``key_proj`` / ``value_proj``,
    loaded as its shards: one matmul, and under vLLM's LoRA one wrapper, where the checkpoint
    has three) and optional separate position projections, named as in HF."""

    def __init__(self, config, prefix: str = "", quant_config: Any = None) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = getattr(config, "attention_head_size", None) or hidden // self.num_heads
        width = self.num_heads * self.head_dim
        self.qkv_proj = QKVParallelLinear(
            hidden, self.head_dim, self.num_heads, bias=True, quant_config=quant_config,
            prefix=f"{prefix}.qkv_proj",
        )  # fmt: skip
        self.local_width = self.qkv_proj.num_heads * self.head_dim  # this rank's heads
        types = config.pos_att_type or []
        if isinstance(types, str):
            types = [t.strip() for t in types.lower().split("|")]
        self.relative = bool(getattr(config, "relative_attention", False))
        # HF counts c2p / p2c in the scale even when relative attention is off.
        self.scale_factor = 1 + ("c2p" in types) + ("p2c" in types)
        self.c2p = self.relative and "c2p" in types
        self.p2c = self.relative and "p2c" in types
        self.share_att_key = bool(getattr(config, "share_att_key", False))
        self.relative_positions = relative_positions(config)
        if self.relative and not self.share_att_key:
            if self.c2p:
                self.pos_key_proj = ColumnParallelLinear(
                    hidden, width, bias=True, quant_config=quant_config,
                    prefix=f"{prefix}.pos_key_proj",
                )  # fmt: skip
            if self.p2c:
                self.pos_query_proj = ColumnParallelLinear(
                    hidden, width, bias=True, quant_config=quant_config,
                    prefix=f"{prefix}.pos_query_proj",
                )  # fmt: skip
        # The relative rows through the query / key weights p2c / c2p use, [2S, this rank's
        # width]: they depend on the weights alone, so they are projected once when the weights
        # are loaded (cache_relative_rows) instead of in every step, unless a projection is
        # quantized (its weights are final only after loading; projected per step then).
        self.rows_cached = False
        self.register_buffer("pos_query_rows", None, persistent=False)
        self.register_buffer("pos_key_rows", None, persistent=False)

    def relative_sources(self) -> tuple[tuple[nn.Module, int] | None, ...]:
        """``(layer, packed slice)`` whose weights project the relative rows for p2c (the
        query projection) and for c2p (the key projection); ``None`` where unused."""
        if self.share_att_key:
            return (self.qkv_proj, 0) if self.p2c else None, (
                self.qkv_proj,
                1,
            ) if self.c2p else None
        return (
            (self.pos_query_proj, 0) if self.p2c else None,
            (self.pos_key_proj, 0) if self.c2p else None,
        )

    def relative_rows(
        self, rel: torch.Tensor, project: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    ) -> list[torch.Tensor | None]:
        """p2c's and c2p's relative rows [2S, width]: ``rel`` through their sources' weights by
        ``project(layer, rows)``, the packed ``qkv_proj`` once for both."""
        sources = self.relative_sources()
        if not self.share_att_key:
            return [None if s is None else project(s[0], rel) for s in sources]
        width = self.local_width
        packed = project(self.qkv_proj, rel)
        return [
            None if s is None else packed[:, s[1] * width : (s[1] + 1) * width] for s in sources
        ]

    def cache_relative_rows(self, rel: torch.Tensor | None) -> None:
        """Project the relative rows with the weights just loaded (see ``rows_cached``)."""
        sources = [s for s in self.relative_sources() if s is not None]
        self.rows_cached = (
            rel is not None and bool(sources) and all(unquantized(layer) for layer, _ in sources)
        )
        if not self.rows_cached:
            return
        with torch.no_grad():
            rows = self.relative_rows(rel, loaded_projection)
        for name, value in zip(("pos_query_rows", "pos_key_rows"), rows):
            held = getattr(self, name)
            if value is None:
                continue
            if held is not None and held.shape == value.shape:
                held.copy_(value)  # a reload keeps the address CUDA graphs read
            else:
                setattr(self, name, value.contiguous())

    def forward(
        self,
        x: torch.Tensor,
        rel_embeddings: torch.Tensor | None,
        positions: torch.Tensor,
        rows: RowBounds | None = None,
    ) -> torch.Tensor:
        def heads(t: torch.Tensor) -> torch.Tensor:  # this rank's heads under TP
            return t.view(t.shape[0], -1, self.head_dim)

        q, k, v = heads(self.qkv_proj(x)[0]).chunk(3, dim=1)  # views, strided by the packing
        c2p = p2c = None  # [H, T, 2 * span]: computed here, inside the compiled piece
        if self.c2p or self.p2c:
            if self.rows_cached:
                query_rows, key_rows = self.pos_query_rows, self.pos_key_rows
            else:
                query_rows, key_rows = self.relative_rows(rel_embeddings, base_projection)
            query_source, key_source = self.relative_sources()
            if key_source is not None:  # the tokens' queries against the rows' keys
                proj, part = key_source
                c2p = projected_relative_scores(q, heads(key_rows), proj, rel_embeddings, part)
            if query_source is not None:  # the tokens' keys against the rows' queries
                proj, part = query_source
                p2c = projected_relative_scores(k, heads(query_rows), proj, rel_embeddings, part)
        out = q.new_empty(q.shape)
        if rows is not None:
            torch.ops.vllm_factory.deberta_attention_rows(
                q, k, v, rows.start, rows.end, rows.rel_index, c2p, p2c, self.scale_factor,
                rows.max_seqlen, out,
            )  # fmt: skip
        else:
            torch.ops.vllm_factory.deberta_attention(
                q, k, v, positions, c2p, p2c, self.scale_factor, *self.relative_positions, out
            )
        return out.view(out.shape[0], -1)


class DenseAddNorm(nn.Module):
    """HF's ``*Output``: ``LayerNorm(dense(x) + residual)``."""

    def __init__(
        self, in_size: int, hidden: int, eps: float, prefix: str = "", quant_config: Any = None
    ) -> None:
        super().__init__()
        self.dense = RowParallelLinear(
            in_size, hidden, bias=True, quant_config=quant_config, prefix=f"{prefix}.dense"
        )
        self.LayerNorm = LayerNorm(hidden, eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm.add_and_norm(self.dense(x)[0], residual)


class Attention(nn.Module):
    def __init__(self, config, prefix: str = "", quant_config: Any = None) -> None:
        super().__init__()
        width = config.num_attention_heads * (
            getattr(config, "attention_head_size", None)
            or config.hidden_size // config.num_attention_heads
        )
        self.self = SelfAttention(config, f"{prefix}.self", quant_config)
        self.output = DenseAddNorm(
            width, config.hidden_size, config.layer_norm_eps, f"{prefix}.output", quant_config
        )

    def forward(self, x, rel_embeddings, positions, rows=None) -> torch.Tensor:
        return self.output(self.self(x, rel_embeddings, positions, rows), x)


class Intermediate(nn.Module):
    def __init__(self, config, prefix: str = "", quant_config: Any = None) -> None:
        super().__init__()
        self.dense = ColumnParallelLinear(
            config.hidden_size, config.intermediate_size, bias=True,
            quant_config=quant_config, prefix=f"{prefix}.dense",
        )  # fmt: skip
        self.act = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x)[0])


class Layer(nn.Module):
    def __init__(self, config, prefix: str = "", quant_config: Any = None) -> None:
        super().__init__()
        self.attention = Attention(config, f"{prefix}.attention", quant_config)
        self.intermediate = Intermediate(config, f"{prefix}.intermediate", quant_config)
        self.output = DenseAddNorm(
            config.intermediate_size, config.hidden_size, config.layer_norm_eps,
            f"{prefix}.output", quant_config,
        )  # fmt: skip

    def forward(self, x, rel_embeddings, positions, rows=None) -> torch.Tensor:
        attn = self.attention(x, rel_embeddings, positions, rows)
        return self.output(self.intermediate(attn), attn)


class ConvLayer(nn.Module):
    """DeBERTa-v2's convolution beside layer 0 (``conv_kernel_size`` > 0), per sequence."""

    def __init__(self, config) -> None:
        super().__init__()
        size = config.conv_kernel_size
        self.conv = nn.Conv1d(
            config.hidden_size, config.hidden_size, size, padding=(size - 1) // 2,
            groups=getattr(config, "conv_groups", 1),
        )  # fmt: skip
        self.act = activation(getattr(config, "conv_act", "tanh"))
        self.LayerNorm = LayerNorm(config.hidden_size, config.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor, positions: torch.Tensor):
        # Each sequence padded with zeros on its own keeps the kernel from reaching into its
        # neighbours, as HF's zero padding and masked embeddings do.
        out = torch.empty_like(x)
        conv = self.conv
        torch.ops.vllm_factory.deberta_conv(x, positions, conv.weight, conv.bias, conv.groups, out)
        return self.LayerNorm.add_and_norm(self.act(out), residual)


class Encoder(nn.Module):
    def __init__(
        self, config, prefix: str = "", rows_max_seqlen: int = 0, quant_config: Any = None
    ) -> None:
        """``rows_max_seqlen`` > 0: attention through ``vllm_factory::deberta_attention_rows``
        for sequences of at most that many tokens (0: through the split-point op).
        ``quant_config``: vLLM's quantization of the layers' linear projections (``--quantization``)."""
        super().__init__()
        self.config = config
        self.layer = nn.ModuleList(
            Layer(config, f"{prefix}.layer.{i}", quant_config)
            for i in range(config.num_hidden_layers)
        )
        self.relative_attention = bool(getattr(config, "relative_attention", False))
        self.span = relative_positions(config)[0]
        if self.relative_attention:
            self.rel_embeddings = nn.Embedding(2 * self.span, config.hidden_size)
        norm_rel = str(getattr(config, "norm_rel_ebd", "none") or "none").lower()
        self.norm_rel_ebd = "layer_norm" in [x.strip() for x in norm_rel.split("|")]
        if self.norm_rel_ebd:
            self.LayerNorm = LayerNorm(config.hidden_size, config.layer_norm_eps)
        self.conv = ConvLayer(config) if getattr(config, "conv_kernel_size", 0) > 0 else None
        self.rows_max_seqlen = 0
        if rows_max_seqlen:
            self.use_rows_attention(rows_max_seqlen)

    def use_rows_attention(self, max_seqlen: int) -> None:
        """Attention through ``vllm_factory::deberta_attention_rows`` (no split point, no host
        data) for sequences of at most ``max_seqlen`` tokens, with one relative-position table
        for every step."""
        self.rows_max_seqlen = max_seqlen
        if self.relative_attention:
            span, buckets, max_rel = relative_positions(self.config)
            device = self.rel_embeddings.weight.device
            table = relative_position_index(max_seqlen, span, buckets, max_rel, device)
            self.register_buffer("rows_rel_index", table, persistent=False)

    def rel_embedding(self) -> torch.Tensor | None:
        if not self.relative_attention:
            return None
        rel = self.rel_embeddings.weight
        return self.LayerNorm(rel) if self.norm_rel_ebd else rel

    def cache_relative_rows(self) -> bool:
        """Each layer's relative rows from the weights just loaded
        (:meth:`SelfAttention.cache_relative_rows`); whether any layer keeps them."""
        with torch.no_grad():
            rel = self.rel_embedding()
            for layer in self.layer:
                layer.attention.self.cache_relative_rows(rel)
        return any(layer.attention.self.rows_cached for layer in self.layer)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        rel = self.rel_embedding()
        embedded = x
        rows = None
        if self.rows_max_seqlen:
            start, end = sequence_bounds(positions)
            table = getattr(self, "rows_rel_index", None)
            rows = RowBounds(start, end, table, self.rows_max_seqlen)
        for i, layer in enumerate(self.layer):
            x = layer(x, rel, positions, rows)
            if i == 0 and self.conv is not None:
                x = self.conv(embedded, x, positions)
        return x


@support_torch_compile(
    dynamic_arg_dims={"input_ids": 0, "positions": 0}, enable_if=compat.compiles_in_engine
)
class DebertaV2Encoder(nn.Module):
    """Embeddings -> DeBERTa layers on vLLM's packed ``[T]`` token batch."""

    def __init__(self, config, vllm_config=None, prefix: str = "") -> None:
        super().__init__()
        rows_max_seqlen = 0
        if rows_attention_usable(vllm_config):
            model = vllm_config.model_config
            rows_max_seqlen = max(model.max_model_len, config.max_position_embeddings)
        else:
            compat.split_graph_at(vllm_config, ATTENTION_OP)
        compat.split_graph_at(vllm_config, CONV_OP)
        if vllm_config is not None:
            attention = "rows" if rows_max_seqlen else "split"
            compat.add_compile_key(vllm_config, deberta_attention=attention)
        self.config = config
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(
            config, prefix=f"{prefix}.encoder" if prefix else "encoder",
            rows_max_seqlen=rows_max_seqlen, quant_config=compat.quant_config(vllm_config),
        )  # fmt: skip

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embeddings.word_embeddings(input_ids)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``[T]`` ids and per-sequence positions -> ``[T, hidden]`` last hidden states."""
        return self.encoder(self.embeddings(input_ids, positions), positions)

    def load_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]],
        prefixes: tuple[str, ...] = WEIGHT_PREFIXES,
    ) -> set[str]:
        """Load HF ``DebertaV2Model`` names, bare or under one of ``prefixes``.

        Names that match no parameter (task heads, ``position_ids``) are skipped; the returned
        set holds the loaded parameter names. The relative rows are then projected
        (:meth:`Encoder.cache_relative_rows`).
        """
        loaded = load_by_name(self, weights, prefixes=prefixes, rename=packed_name)
        cached = self.encoder.cache_relative_rows()
        # Steps that read the rows compile to another graph than steps that project them, and
        # vLLM's compile caches do not see how the weights came (a start with
        # --load-format dummy never calls this): the choice goes into their key.
        rows = "load" if cached else "step"
        compat.add_compile_key(getattr(self, "vllm_config", None), deberta_relative_rows=rows)
        return loaded
