"""The GLiNER span head as a ``FactoryPooler`` (pure torch, no vLLM import).

Per prompt: encoder token states -> (projection) -> label vectors at the ``<<ENT>>`` tokens
(bi-encoders: from the label encoder, cached; :mod:`~vllm_factory.heads.gliner.labels`)
and word vectors from each word's sub-tokens -> (BiLSTM over words) -> markerV0 span vectors
for every (start, width < max_width) -> span x label dot products -> sigmoid. Output: one
float32 ``[num_words, max_width, num_labels]`` tensor per prompt (on the host).

The span MLP is evaluated in an equivalent cheaper order: its first layer per word (the
start and end halves of its weight) and summed per span, its last layer folded into the label
vectors (:class:`MarkerV0`, :meth:`GLiNERSpanHead.score`).

All prompts of a step go through these stages together (their words back to back; only the
BiLSTM sees them padded): a fixed number of batched kernels per step whatever the number of
requests, and no device-to-host synchronisation (every index is computed on the host from the
prompt token ids and word layouts, which live there, and copied to the device once).

A prompt without a usable word layout (vLLM's start-up dummy runs send all-zero prompts with
no per-request data; a request that bypassed the GLiNER IOProcessor has none either) gets an
empty ``[0, max_width, num_labels]`` tensor: nothing may raise inside the engine, and the
IOProcessor turns an empty result for a real text into an error for that request alone.

Module and parameter names follow gliner's state dict (``token_rep_layer.projection``,
``rnn.lstm``, ``span_rep_layer.span_rep_layer.project_start``, ``prompt_rep_layer``), so
loading is a lookup.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from vllm_factory.core import envs
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest
from vllm_factory.heads.gliner.labels import (
    LabelEncoderModule,
    LabelVectorCache,
    cache_size_from_env,
    encode_labels,
    label_ids_for,
)
from vllm_factory.heads.gliner.prompts import WordLayout, layout_for
from vllm_factory.heads.gliner.settings import GLiNERSettings
from vllm_factory.kernels import bidirectional_lstm, select_backend, span_logits

logger = logging.getLogger(__name__)


def projection(width: int, out: int | None = None) -> nn.Sequential:
    """gliner's two-layer MLP (Linear 4x, ReLU, Dropout, Linear); dropout is inert here."""
    out = width if out is None else out
    return nn.Sequential(
        nn.Linear(width, out * 4), nn.ReLU(), nn.Dropout(0.0), nn.Linear(out * 4, out)
    )


class TokenRepLayer(nn.Module):
    """gliner's ``token_rep_layer`` minus the text encoder (that is the vLLM backbone): the
    projection of the encoder output when the widths differ, and for a bi-encoder the label
    encoder with its own projection (:mod:`~vllm_factory.heads.gliner.labels`)."""

    def __init__(self, settings: GLiNERSettings) -> None:
        super().__init__()
        width = settings.hidden_size
        if settings.has_projection:
            self.projection = nn.Linear(settings.encoder_hidden_size, width)
        if settings.labels_encoder_config is not None:
            self.labels_encoder = LabelEncoderModule(settings.labels_encoder_config)
            labels_width = settings.labels_encoder_hidden_size
            if labels_width != width:
                self.labels_projection = nn.Linear(labels_width, width)


class WordLSTM(nn.Module):
    """gliner's BiLSTM over word vectors, on a batch of texts padded to the longest.

    In float32 it runs in IEEE float32 on the GPU too: cuDNN runs float32 RNNs in TF32 unless
    told otherwise (``torch.backends.cudnn.rnn.fp32_precision`` is ``"tf32"`` by default), which
    moves served scores past float32 parity's tolerance (the GPU check, docs/parity.md). The
    setting is restored after the call; it has no effect without cuDNN.
    """

    def __init__(self, width: int, layers: int, cuda_graphs: bool = True) -> None:
        super().__init__()
        # False where the server runs eagerly (``--enforce-eager``): no CUDA graphs of ours either
        self.cuda_graphs = cuda_graphs
        self.lstm = nn.LSTM(
            width, width // 2, num_layers=layers, bidirectional=True, batch_first=True
        )
        # Not submodules (the state dict keeps gliner's names): per layer, the two directions
        # as unidirectional LSTMs and :meth:`by_kernel`'s stacked weights (both built at first
        # use, after loading), and the CUDA graphs of :meth:`by_graph` per bucket.
        self._directions: list[tuple[nn.LSTM, nn.LSTM]] = []
        self._stacked: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._graphs: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor, object]] = {}
        self._graph_pool: object = None
        self._graphs_failed = False
        self._branch: object = None  # the backward direction's stream (two-stream graphs)

    def forward(self, words: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``[B, W, width]`` padded word vectors, ``lengths`` [B] on the CPU, longest first ->
        ``[B, W, width]`` (zero past each text's length).

        cuDNN launches two kernels per word and direction, so a step costs the engine's CPU
        more than its GPU work, whatever the batch (docs/benchmarks/deberta_gliner.md). So on
        a GPU the recurrence is replayed from CUDA graphs (:meth:`by_graph`;
        ``VLLM_FACTORY_GLINER_LSTM_GRAPHS=0`` or ``--enforce-eager`` turn that off, leaving
        cuDNN). A 16-bit head's graphs hold ``vllm_factory.kernels.bidirectional_lstm``'s
        one-launch-per-word form instead of cuDNN's cell (:func:`lstm_step_kernel_wanted`;
        ``VLLM_FACTORY_GLINER_LSTM_KERNEL=cudnn`` keeps cuDNN's)."""
        with exact_float32_rnn(words.dtype == torch.float32):
            if self.takes_graphs(words):
                graphed = self.by_graph(words, lengths)
                if graphed is not None:
                    return graphed
            if words.is_cuda:  # cuDNN runs a packed batch in one call
                packed = self.lstm(pack_padded_sequence(words, lengths, batch_first=True))[0]
                return pad_packed_sequence(packed, batch_first=True, total_length=words.shape[1])[0]
            # On the CPU only unpacked sequences reach oneDNN's LSTM kernel (a packed batch
            # takes a per-timestep fallback): one call per text.
            out = torch.zeros_like(words)
            for row, length in enumerate(lengths.tolist()):
                out[row, :length] = self.lstm(words[row : row + 1, :length])[0][0]
            return out

    def takes_graphs(self, words: torch.Tensor) -> bool:
        """Whether :meth:`by_graph` runs this call: not turned off (``lstm_graphs_wanted``), on
        a GPU, the server not eager, and no capture has failed."""
        return (
            self.cuda_graphs and words.is_cuda and lstm_graphs_wanted() and not self._graphs_failed
        )

    def by_directions(
        self, words: torch.Tensor, lengths: torch.Tensor, branch: object = None
    ) -> torch.Tensor:
        """The same layers as two unidirectional LSTMs per layer over the padded batch, unpacked:
        forward over the words as they are; backward over each text reversed within its length
        (``lengths`` [B] on ``words``' device), its output reversed back. Equal to the packed
        BiLSTM at every word inside its text's length (past it: values the head never reads).
        Fixed shapes and no host synchronisation: what a CUDA graph can hold. With ``branch``
        (a CUDA stream) the backward direction runs on it, beside the forward one (they are
        independent until joined), and the current stream waits for it before the join."""
        self._build_directions(words)
        steps = torch.arange(words.shape[1], device=words.device)[None, :]
        ends = lengths.to(words.device)[:, None]
        # [B, W]: position t reads t' = length - 1 - t inside the text, itself past it
        reverse = torch.where(steps < ends, ends - 1 - steps, steps)[..., None]
        out = words
        for ahead, behind in self._directions:
            if branch is None:
                forward = ahead(out)[0]
                backward = behind(out.gather(1, reverse.expand_as(out)))[0]
                backward = backward.gather(1, reverse.expand_as(backward))
            else:
                main = torch.cuda.current_stream(words.device)
                branch.wait_stream(main)  # type: ignore[attr-defined]
                with torch.cuda.stream(branch):  # type: ignore[arg-type]
                    backward = behind(out.gather(1, reverse.expand_as(out)))[0]
                    backward = backward.gather(1, reverse.expand_as(backward))
                forward = ahead(out)[0]
                main.wait_stream(branch)  # type: ignore[arg-type]
                backward.record_stream(main)  # made on the branch, read and freed on main
                out.record_stream(branch)  # type: ignore[arg-type]
            out = torch.cat([forward, backward], dim=-1)
        return out

    def _build_directions(self, words: torch.Tensor) -> None:
        like = (words.device, words.dtype)
        if self._directions and (self._directions[0][0].weight_hh_l0.device,
                                 self._directions[0][0].weight_hh_l0.dtype) == like:  # fmt: skip
            return
        lstm, directions = self.lstm, []
        for layer in range(lstm.num_layers):
            pair = []
            for side in ("", "_reverse"):
                weight_ih = getattr(lstm, f"weight_ih_l{layer}{side}")
                # built where it runs, its weights in one chunk: cuDNN would otherwise compact
                # them inside every call (and warn); torch 2.11 flattens no bfloat16 RNN
                # weights (cudnn.is_acceptable), so a bf16 head compacts anyway, as cuDNN's
                # packed BiLSTM does
                one = nn.LSTM(weight_ih.shape[1], lstm.hidden_size, batch_first=True,
                              device=like[0], dtype=like[1])  # fmt: skip
                with torch.no_grad():
                    for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                        getattr(one, f"{kind}_l0").copy_(getattr(lstm, f"{kind}_l{layer}{side}"))
                one.flatten_parameters()
                pair.append(one.eval().requires_grad_(False))
            directions.append((pair[0], pair[1]))
        self._directions = directions

    def by_graph(self, words: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor | None:
        """:meth:`by_directions` replayed from a CUDA graph captured at the first step of each
        bucket (batch to the next power of two, words to the next multiple of
        :data:`GRAPH_STEPS`; of :meth:`by_kernel`'s per-step kernel for a 16-bit head): a few
        launches per step instead of cuDNN's two per word and direction, which held much of
        the engine core's thread in a served profile
        (``docs/benchmarks/h200/2026-11-27-a69a485-deberta_gliner-profile-64-clients``). ``None`` (the caller
        runs cuDNN) while a CUDA graph is being captured elsewhere, or after a capture failed
        (said once)."""
        if torch.cuda.is_current_stream_capturing():
            return None
        batch, steps, width = words.shape
        key = (1 << (batch - 1).bit_length(), -(-steps // GRAPH_STEPS) * GRAPH_STEPS, width,
               words.dtype, words.device, lstm_two_streams_wanted(),
               lstm_step_kernel_wanted(words))  # fmt: skip
        entry = self._graphs.get(key)
        if entry is None:
            try:
                entry = self._graphs[key] = self._capture(*key)
            except Exception:  # never raise in the engine: cuDNN's packed LSTM instead
                logger.warning("GLiNER BiLSTM: CUDA graph capture failed; runs cuDNN packed",
                               exc_info=True)  # fmt: skip
                self._graphs_failed = True
                return None
        inputs, ends, out, graph = entry
        inputs[:batch, :steps].copy_(words)
        ends[:batch].copy_(lengths.to(torch.long).pin_memory(), non_blocking=True)
        graph.replay()
        return out[:batch, :steps].clone()

    def _capture(
        self,
        batch: int,
        steps: int,
        width: int,
        dtype: torch.dtype,
        device: torch.device,
        two_streams: bool = False,
        step_kernel: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, object]:
        inputs = torch.zeros(batch, steps, width, dtype=dtype, device=device)
        ends = torch.zeros(batch, dtype=torch.long, device=device)
        two_streams = two_streams and not step_kernel  # the kernel runs both directions at once
        if two_streams and self._branch is None:
            self._branch = torch.cuda.Stream(device)
        branch = self._branch if two_streams else None

        def layers() -> torch.Tensor:
            if step_kernel:
                return self.by_kernel(inputs, ends, backend="triton", per_step=True)
            return self.by_directions(inputs, ends, branch)

        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up: cuDNN picks its plans (Triton compiles) here
            layers()
        torch.cuda.current_stream(device).wait_stream(side)
        if self._graph_pool is None:
            self._graph_pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        # thread_local: what other threads of the engine do meanwhile (copies of the last
        # step's outputs, say) neither breaks this capture nor is broken by it
        with torch.cuda.graph(graph, pool=self._graph_pool, capture_error_mode="thread_local"):
            out = layers()
        logger.info(
            "GLiNER BiLSTM: CUDA graph captured for %d texts x %d words%s", batch, steps,
            ", the per-step kernel" if step_kernel
            else ", directions on two streams" if branch is not None else "",
        )  # fmt: skip
        return inputs, ends, out, graph

    def by_kernel(
        self,
        words: torch.Tensor,
        lengths: torch.Tensor,
        backend: str = "auto",
        per_step: bool = False,
    ) -> torch.Tensor:
        """The same layers through ``vllm_factory.kernels.bidirectional_lstm``: per layer, one
        GEMM for both directions' input gates, then the recurrence (``backend`` and
        ``per_step`` as there; the weights are stacked once, without autograd, which would send
        ``"auto"`` to the fallback). ``lengths`` on the CPU or on ``words``' device."""
        batch, steps, _ = words.shape
        if words.is_cuda and not lengths.is_cuda:
            lengths = lengths.pin_memory().to(words.device, non_blocking=True)
        out = words
        for layer in range(self.lstm.num_layers):
            w_ih, w_hh, bias = self._stacked_layer(layer)
            gates = torch.addmm(bias, out.reshape(batch * steps, -1), w_ih)
            out = bidirectional_lstm(
                gates.view(batch, steps, 2, -1), w_hh, lengths, backend=backend, per_step=per_step
            )
        return out

    def _stacked_layer(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`by_kernel`'s weights of ``layer``, [forward, backward] stacked: ``W_ih^T``
        ``[input, 8H]``, ``W_hh`` ``[2, 4H, H]`` and ``b_ih + b_hh`` ``[8H]``; made at the first
        call on the weights' device and dtype (after loading), not at every step."""
        lstm = self.lstm
        key = (layer, lstm.weight_hh_l0.device, lstm.weight_hh_l0.dtype)
        if key not in self._stacked:
            with torch.no_grad():
                w_ih, w_hh, b_ih, b_hh = (
                    torch.stack(
                        [getattr(lstm, f"{kind}_l{layer}{side}") for side in ("", "_reverse")]
                    )
                    for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
                )
            self._stacked[key] = (w_ih.flatten(0, 1).T, w_hh, (b_ih + b_hh).flatten())
        return self._stacked[key]


# The head's switches (their meaning and defaults: vllm_factory.core.envs).
LSTM_KERNEL_ENV = envs.GLINER_LSTM_KERNEL.name
LSTM_GRAPHS_ENV = envs.GLINER_LSTM_GRAPHS.name
# by_graph's word buckets: a step's longest text rounded up to a multiple of this.
GRAPH_STEPS = 64


# The folded span scoring through vllm_factory.kernels.span_logits' Triton kernel on GPUs (the
# span hidden layer stays in registers; the fallback writes it out with embedding_bag).
SPAN_KERNEL_ENV = envs.GLINER_SPAN_KERNEL.name


def span_kernel_backend() -> str:
    """``span_logits``' backend for the head: ``"auto"`` (Triton on a GPU, the PyTorch
    fallback elsewhere or with ``VLLM_FACTORY_DISABLE_TRITON=1``) unless
    ``VLLM_FACTORY_GLINER_SPAN_KERNEL=0``, which keeps ``"torch"`` (``embedding_bag`` and
    ``addmm``). The default because it served faster with the GPU busy
    (docs/benchmarks/deberta_gliner.md, docs/benchmarks/mt5_gliner.md)."""
    return "auto" if envs.get(envs.GLINER_SPAN_KERNEL) else "torch"


# Opt-in: inside the BiLSTM's CUDA graphs the two directions run on two streams (they are
# independent until joined; the BiLSTM is a large share of a served step's GPU time, its words
# one after the other in each direction).
LSTM_TWO_STREAMS_ENV = envs.GLINER_LSTM_TWO_STREAMS.name


def lstm_two_streams_wanted() -> bool:
    """Whether :meth:`WordLSTM.by_graph` captures the directions on two streams: opted in with
    ``VLLM_FACTORY_GLINER_LSTM_TWO_STREAMS=1``, until GPU-checked and measured."""
    return envs.get(envs.GLINER_LSTM_TWO_STREAMS)


def lstm_graphs_wanted() -> bool:
    """The GPU head's BiLSTM from CUDA graphs unless ``VLLM_FACTORY_GLINER_LSTM_GRAPHS=0``."""
    return envs.get(envs.GLINER_LSTM_GRAPHS)


def lstm_step_kernel_wanted(words: torch.Tensor) -> bool:
    """Whether :meth:`WordLSTM.by_graph` captures the per-step kernel (``bidirectional_lstm(...,
    per_step=True)``: one launch per word for both directions) instead of cuDNN's two per word
    and direction: the default (``VLLM_FACTORY_GLINER_LSTM_KERNEL`` unset or ``steps``;
    ``cudnn`` keeps cuDNN's cell), on the terms of :func:`_lstm_kernel_fits`.

    The default because it won, alone (``bench_word_lstm.py``) and served
    (docs/benchmarks/deberta_gliner.md, docs/benchmarks/mt5_gliner.md)."""
    value = envs.get(envs.GLINER_LSTM_KERNEL)
    return value == "steps" and _lstm_kernel_fits(
        words, value, envs.is_set(envs.GLINER_LSTM_KERNEL)
    )


def _lstm_kernel_fits(words: torch.Tensor, value: str, asked: bool) -> bool:
    """A 16-bit head (its dtype) where ``vllm_factory.kernels`` would run Triton for it
    (``select_backend``: a GPU, Triton importable and not ``VLLM_FACTORY_DISABLE_TRITON``, not
    compiling, no autograd). A float32 head keeps cuDNN (the kernels' float32 variants are
    many times slower than cuDNN), and says so once where ``VLLM_FACTORY_GLINER_LSTM_KERNEL``
    was set (``asked``) to ``value``, a kernel."""
    if select_backend("auto", words) != "triton":
        return False
    if words.dtype in (torch.float16, torch.bfloat16):
        return True
    if asked:
        _say_float32_head_keeps_cudnn(words.dtype, value)
    return False


@functools.cache
def _say_float32_head_keeps_cudnn(dtype: torch.dtype, value: str) -> None:
    logger.warning(
        "%s=%s is ignored for a %s GLiNER head (the kernel is fast for 16-bit weights only); it "
        "runs cuDNN", LSTM_KERNEL_ENV, value, dtype,
    )  # fmt: skip


@contextlib.contextmanager
def exact_float32_rnn(active: bool) -> Iterator[None]:
    """cuDNN RNNs in IEEE float32 (not TF32) inside the block, when ``active``."""
    rnn = getattr(torch.backends.cudnn, "rnn", None)
    if not active or rnn is None:  # torch < 2.9 has no per-operation setting
        yield
        return
    before = rnn.fp32_precision
    rnn.fp32_precision = "ieee"
    try:
        yield
    finally:
        rnn.fp32_precision = before


class MarkerV0(nn.Module):
    """Span vector = MLP(relu([MLP_start(h[start]); MLP_end(h[end])])).

    The span MLP's first layer acts on the two halves of the joined vector apart:
    ``W [relu(s); relu(e)] + b == W_s relu(s) + (W_e relu(e) + b)``. Both terms are made once
    per word (:meth:`span_table`) and a span's hidden layer is the sum of its start's row and
    its end's row (:meth:`span_hidden`), instead of a ``2 * width``-wide product per span.
    """

    def __init__(self, width: int, max_width: int) -> None:
        super().__init__()
        self.max_width = max_width
        self.project_start = projection(width)
        self.project_end = projection(width)
        self.out_project = projection(2 * width, width)

    def endpoints(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The start and end projections of every word ``[N, width]``."""
        return self.project_start(words), self.project_end(words)

    def span_table(self, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        """``[2N, 4 * width]``: rows ``0..N-1`` every word's start term of the span MLP's first
        layer, rows ``N..2N-1`` its end term (with the layer's bias)."""
        first = self.out_project[0]
        width = starts.shape[-1]
        return torch.cat(
            (
                F.linear(starts.relu(), first.weight[:, :width]),
                F.linear(ends.relu(), first.weight[:, width:], first.bias),
            )
        )

    def span_rows(
        self, first: torch.Tensor, num_words: torch.Tensor, table_words: int | None = None
    ) -> torch.Tensor:
        """``[N * max_width, 2]``: the span table rows (start term, end term) of every span
        (word r, width k), in that order. Words of several texts lie back to back;
        ``first[r]`` is the row of the first word of row r's text and ``num_words[r]`` that
        text's length (both ``[N]``, on the device). ``table_words``: the words the table was
        made of (its end terms start there), ``N`` unless it was made of padded rows."""
        total = first.shape[0]
        table_words = total if table_words is None else table_words
        row = torch.arange(total, device=first.device).unsqueeze(1)
        end = row + torch.arange(self.max_width, device=first.device).unsqueeze(0)
        base = first.unsqueeze(1)
        # gliner multiplies the indices of spans running past the text by 0: they become
        # (0, 0), the text's first word.
        outside = end >= (first + num_words).unsqueeze(1)  # [N, max_width]
        start_rows = torch.where(outside, base, row)
        end_rows = torch.where(outside, base, end) + table_words
        return torch.stack((start_rows, end_rows), -1).view(-1, 2)

    @staticmethod
    def span_hidden(table: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``[n, 4 * width]``: the span MLP's hidden layer (after its ReLU) of the spans whose
        table rows are ``rows`` ``[n, 2]``; one gather-and-sum launch."""
        return F.embedding_bag(rows, table, mode="sum").relu_()

    def spans(
        self,
        starts: torch.Tensor,
        ends: torch.Tensor,
        first: torch.Tensor,
        num_words: torch.Tensor,
        rows: slice,
    ) -> torch.Tensor:
        """Span vectors ``[n, max_width, width]`` of the spans starting at word rows ``rows``
        (``first`` / ``num_words`` as in :meth:`span_rows`)."""
        span_rows = self.span_rows(first, num_words)
        chosen = span_rows[rows.start * self.max_width : rows.stop * self.max_width]
        hidden = self.span_hidden(self.span_table(starts, ends), chosen)
        return self.out_project[3](hidden).view(-1, self.max_width, starts.shape[-1])

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        """``[num_words, width]`` word vectors of one text -> ``[num_words, max_width, width]``."""
        count = words.shape[0]
        first = torch.zeros(count, dtype=torch.long, device=words.device)
        length = torch.full_like(first, count)
        return self.spans(*self.endpoints(words), first, length, slice(0, count))


class SpanRepLayer(nn.Module):
    def __init__(self, width: int, max_width: int) -> None:
        super().__init__()
        self.span_rep_layer = MarkerV0(width, max_width)


class GLiNERSpanHead(FactoryPooler):
    needs_token_ids = True  # label markers are found in the prompt tokens
    _logged: ClassVar[set[str]] = set()  # kinds of unscored prompts already logged

    def __init__(
        self, settings: GLiNERSettings, dtype: torch.dtype | None = None, cuda_graphs: bool = True
    ) -> None:
        """``dtype``: the head's (default: float32); ``cuda_graphs``: whether the head may
        capture CUDA graphs of its own (the BiLSTM's; False for an eager server)."""
        super().__init__()
        self.settings = settings
        width = settings.hidden_size
        if settings.has_projection or settings.bi_encoder:
            self.token_rep_layer = TokenRepLayer(settings)
        if settings.bi_encoder:
            self.label_cache = LabelVectorCache(cache_size_from_env())
            encoder_config = settings.labels_encoder_config or {}
            pad = encoder_config.get("pad_token_id")
            self.labels_pad_id = int(pad) if pad is not None else 0
            # What the label encoder can take: ids of its vocabulary, its positions' worth.
            self.label_limits = {
                "vocab_size": encoder_config.get("vocab_size"),
                "max_tokens": encoder_config.get("max_position_embeddings"),
            }
        if settings.num_rnn_layers > 0:
            self.rnn = WordLSTM(width, settings.num_rnn_layers, cuda_graphs)
        self.span_graphs = SpanGraphs(cuda_graphs)  # not a module: no weights of its own
        self.span_rep_layer = SpanRepLayer(width, settings.max_width)
        self.prompt_rep_layer = projection(width)
        if dtype is not None:
            self.to(dtype)

    # -- weights ------------------------------------------------------------------------

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load gliner state-dict names (``rnn.lstm.weight_ih_l0``, ...); unknown names raise.
        A bi-encoder's label encoder may also save buffers (e.g. position ids): copied too."""
        params = dict(self.named_parameters())
        buffers = dict(self.named_buffers())
        loaded: set[str] = set()
        for name, tensor in weights:
            param = params.get(name)
            if param is None and name in buffers:
                with torch.no_grad():
                    buffers[name].copy_(tensor.to(buffers[name].dtype))
                continue
            if param is None:
                raise KeyError(f"unexpected GLiNER head weight {name!r}")
            with torch.no_grad():
                param.copy_(tensor.to(param.dtype))
            loaded.add(name)
        missing = set(params) - loaded
        if missing:
            raise KeyError(f"GLiNER head weights missing from the checkpoint: {sorted(missing)}")
        return loaded

    # -- forward --------------------------------------------------------------------------

    def forward(
        self, hidden_states: Sequence[torch.Tensor], requests: Sequence[PoolerRequest]
    ) -> list[torch.Tensor]:
        """Scores of every scorable prompt of the step in one batched pass (see
        :class:`StepPlan`); the others get :meth:`no_scores`."""
        outputs: list[torch.Tensor | None] = [None] * len(requests)
        scored: list[tuple[int, WordLayout, np.ndarray]] = []
        bi_labels: list[list[list[int]]] = []  # bi-encoder: each scored prompt's label ids
        for i, (hidden, request) in enumerate(zip(hidden_states, requests)):
            layout = layout_for(request.extra, request.token_ids)
            rows = min(hidden.shape[0], len(request.token_ids))
            if self.settings.bi_encoder:
                label_ids = label_ids_for(request.extra, **self.label_limits)
                labels = None if label_ids is None else np.arange(len(label_ids))
            else:
                labels = None if layout is None else self.label_positions(request.token_ids)
            if (
                layout is None
                or labels is None
                or not layout.fits(rows)
                or (not self.settings.bi_encoder and len(labels) and labels[-1] >= rows)
            ):
                self._log_unscored(layout)
                outputs[i] = self.no_scores(request, hidden.device)
            elif not layout.counts:  # a text without words: nothing to score
                outputs[i] = self.no_scores(request, hidden.device)
            else:
                scored.append((i, layout, labels))
                if self.settings.bi_encoder:
                    bi_labels.append(label_ids)  # type: ignore[arg-type]
        if scored:
            label_table = None
            if self.settings.bi_encoder:  # one table of the step's labels, rows per prompt
                flat = [ids for prompt in bi_labels for ids in prompt]
                label_table = self.label_vectors(flat, hidden_states[scored[0][0]].device)
                starts = np.cumsum([0, *[len(p) for p in bi_labels[:-1]]])
                scored = [(i, lay, lab + start) for (i, lay, lab), start in zip(scored, starts)]
            plan = StepPlan.build(
                [hidden_states[i].shape[0] for i, _, _ in scored],
                [labels for _, _, labels in scored],
                [layout for _, layout, _ in scored],
                self.settings.subtoken_pooling,
                labels_in_tokens=label_table is None,
            )
            hidden = [hidden_states[i] for i, _, _ in scored]
            for (i, _, _), scores in zip(scored, self.score(hidden, plan, label_table)):
                outputs[i] = scores
        return outputs  # type: ignore[return-value]

    def label_vectors(self, label_ids: list[list[int]], device: torch.device) -> torch.Tensor:
        """Bi-encoder: final label vectors ``[len(label_ids), width]`` (after
        ``prompt_rep_layer``), from the cache or encoded (all misses of the step at once)."""
        layer = self.token_rep_layer
        dtype = self.prompt_rep_layer[0].weight.dtype

        def encode(missing: list) -> torch.Tensor:
            pooled = encode_labels(
                layer.labels_encoder.model,
                getattr(layer, "labels_projection", None),
                missing,
                self.labels_pad_id,
                device,
            )
            return self.prompt_rep_layer(pooled.to(dtype))

        return self.label_cache.vectors(label_ids, encode)

    def no_scores(self, request: PoolerRequest, device: torch.device) -> torch.Tensor:
        """The well-formed empty result ``[0, max_width, num_labels]`` of an unscored prompt."""
        labels = 0
        if self.settings.bi_encoder:
            labels = len(label_ids_for(request.extra, **self.label_limits) or ())
        elif request.token_ids is not None:
            labels = int((request.token_ids == self.settings.class_token_index).sum())
        return torch.zeros((0, self.settings.max_width, labels), device=device)

    @classmethod
    def _log_unscored(cls, layout: WordLayout | None) -> None:
        kind = "absent" if layout is None else "mismatched"
        if kind in cls._logged:
            return
        cls._logged.add(kind)
        if layout is None:
            logger.info(
                "GLiNER head: a prompt without a word layout gets empty scores (vLLM's start-up "
                "dummy runs; real requests carry one through the GLiNER IOProcessor)"
            )
        else:
            logger.warning("GLiNER head: a word layout runs past its prompt; empty scores")

    def label_positions(self, token_ids: torch.Tensor) -> np.ndarray:
        """Token positions of the label vectors (``token_ids`` are on the CPU: no device sync).
        In NumPy: half the host time of the same three tensor operations, per prompt of every
        step on the engine's only thread."""
        ids = token_ids.cpu().numpy()
        positions = np.flatnonzero(ids == self.settings.class_token_index)
        return positions if self.settings.embed_ent_token else positions + 1

    def score(
        self,
        hidden: Sequence[torch.Tensor],
        plan: StepPlan,
        label_table: torch.Tensor | None = None,
    ) -> list[torch.Tensor]:
        """Sigmoid scores ``[num_words, max_width, num_labels]`` (float32, on the CPU), one per
        prompt of ``plan``, in its input order.

        The MLPs run on the step's words back to back (on a GPU with zero rows up to a
        :class:`RowBuckets` size); the BiLSTM on the padded batch. The span MLP's first layer
        is made per word (:meth:`MarkerV0.span_table`); its last layer is folded into the
        label vectors (``(W h + b) . l == h . (W^T l) + b . l``)
        while the step has fewer labels than ``4/3`` of the width, so a span costs one gathered
        sum and a product with the step's labels. Spans are scored a ``SPAN_CHUNK`` at a time,
        so the memory a step needs stays bounded whatever vLLM schedules. Each prompt keeps the
        columns of its own labels; the step's scores reach the host in one copy. A
        bi-encoder's label vectors are rows of ``label_table``. On a GPU the scoring after the
        BiLSTM is replayed from a CUDA graph per bucket (:class:`SpanGraphs`)."""
        dtype = self.prompt_rep_layer[0].weight.dtype
        tokens = (torch.cat(list(hidden)) if len(hidden) > 1 else hidden[0]).to(dtype)
        pad = RowBuckets.for_device(tokens.device)
        if self.settings.has_projection:
            tokens = self.token_rep_layer.projection(pad.rows(tokens))
        index = plan.device_index(tokens.device)
        label_row = pad.rows(index["label_row"])  # padded rows read token (or label) 0
        if label_table is None:  # [labels of the step (padded), width]
            labels = self.prompt_rep_layer(tokens[label_row])
        else:
            labels = label_table[label_row]
        words = self.word_vectors(tokens, plan, index)
        if self.settings.runs_rnn:
            padded = words.new_zeros(plan.batch * plan.max_words, words.shape[-1])
            padded[index["word_slot"]] = words
            padded = self.rnn(padded.view(plan.batch, plan.max_words, -1), plan.lengths)
            words = padded.flatten(0, 1)[index["word_slot"]]
        max_width = self.span_rep_layer.span_rep_layer.max_width
        columns = plan.label_columns(index)  # [words, labels per prompt] or None
        scores = None
        if columns is not None and fold_labels(plan.total_labels, words.shape[-1]):
            scores = self.span_graphs.scores(
                self, words, labels, index["first"], index["length"], columns
            )
        if scores is None:
            logits = self.span_logits(
                pad.rows(words), labels, index["first"], index["length"], columns, pad,
                plan.total_labels, [(rows, cols) for _, rows, cols in plan.blocks()],
            )  # fmt: skip
            scores = torch.sigmoid(logits.float())
        if scores.device.type != "cpu":  # vLLM syncs before it reads a pooler output
            scores = scores.to("cpu", non_blocking=True)
        return plan.split(scores.flatten(), max_width)

    def span_logits(
        self,
        words: torch.Tensor,
        labels: torch.Tensor,
        first: torch.Tensor,
        length: torch.Tensor,
        columns: torch.Tensor | None,
        pad: RowBuckets,
        num_labels: int | None = None,
        prompts: Sequence[tuple[slice, slice]] | None = None,
    ) -> torch.Tensor:
        """Span x label logits of the word rows ``first`` / ``length`` describe
        (:meth:`MarkerV0.span_rows`; ``words`` may hold more, padded, rows). ``prompts``: each
        prompt's word rows and label columns, back to back (``None``: one prompt of every row
        and label). Where ``columns`` picks each word's own labels: ``[len(first), max_width,
        labels per prompt]``; else every prompt's ``[words, max_width, labels]`` block
        flattened, back to back. The span MLP's last layer is folded into ``labels`` where
        :func:`fold_labels` says so for ``num_labels`` (the step's real labels; ``None``:
        always folded).

        Spans are scored a chunk of consecutive prompts at a time, against those prompts'
        labels only, each chunk at most ``SPAN_CHUNK`` elements of its widest activation (a
        prompt of more is cut by word rows): the memory a step needs is bounded by the budget,
        not by its words times the labels of all its prompts."""
        marker = self.span_rep_layer.span_rep_layer
        total, max_width = first.shape[0], marker.max_width
        table = marker.span_table(*marker.endpoints(words))
        span_rows = marker.span_rows(first, length, words.shape[0])
        last = marker.out_project[3]
        inner = table.shape[-1]
        if num_labels is None or fold_labels(num_labels, words.shape[-1]):
            weight, bias = labels @ last.weight, labels @ last.bias  # [labels, inner], [labels]
        else:
            weight, bias = None, None
            labels = labels[:num_labels]
        if prompts is None:
            prompts = [(slice(0, total), slice(0, labels.shape[0]))]
        budget = SPAN_CHUNK["cpu" if words.device.type == "cpu" else "other"]
        parts = []
        for group in span_chunks(prompts, max_width, inner, budget):
            cols = slice(group[0][1].start, group[-1][1].stop)
            rows = slice(group[0][0].start, group[-1][0].stop)
            step = max(1, budget // (max_width * max(inner, cols.stop - cols.start)))
            for r in range(rows.start, rows.stop, step):
                chunk = slice(r, min(r + step, rows.stop))
                count = (chunk.stop - chunk.start) * max_width
                chosen = pad.rows(span_rows[chunk.start * max_width : chunk.stop * max_width])
                if weight is not None:  # relu(start row + end row) . folded labels
                    logits = span_logits(
                        table, chosen, weight[cols], bias[cols], backend=span_kernel_backend()
                    )
                else:
                    logits = last(marker.span_hidden(table, chosen)) @ labels[cols].T
                logits = logits[:count].view(-1, max_width, logits.shape[-1])
                if columns is not None:  # each word's own labels: [n, max_width, per prompt]
                    own = columns[chunk] - cols.start
                    parts.append(
                        torch.gather(logits, 2, own.unsqueeze(1).expand(-1, max_width, -1))
                    )
                else:  # each prompt's block of the chunk, flattened
                    parts.extend(
                        logits[
                            max(p_rows.start, chunk.start) - chunk.start :
                            min(p_rows.stop, chunk.stop) - chunk.start,
                            :,
                            p_cols.start - cols.start : p_cols.stop - cols.start,
                        ].flatten()
                        for p_rows, p_cols in group
                        if p_rows.start < chunk.stop and p_rows.stop > chunk.start
                    )  # fmt: skip
        if not parts:
            shape = (0, max_width, columns.shape[1]) if columns is not None else (0,)
            return table.new_zeros(shape)
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def word_vectors(
        self, tokens: torch.Tensor, plan: StepPlan, index: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """``[words of the step, width]``: one vector per word by the checkpoint's sub-token
        pooling; absent words (cut by truncation) are zero."""
        words = tokens.new_zeros(plan.total_words, tokens.shape[-1])
        if plan.pooling in ("first", "last"):
            words[index["word_of_row"]] = tokens[index["word_row"]]
        else:
            reduce = "mean" if plan.pooling == "mean" else "amax"
            words.index_reduce_(
                0, index["word_of_row"], tokens[index["word_row"]], reduce, include_self=False
            )
        return words


def on_a_gpu_by_default(setting: envs.Setting[bool | None], device: torch.device) -> bool:
    """A switch of the head that is on for a GPU head unless set off, and set on, on every
    device (the CPU tests run the GPU's fixed-shape paths with it)."""
    value = envs.get(setting)
    return device.type == "cuda" if value is None else value


# The head's GEMMs take their rows padded up to a bucket (RowBuckets); by device by default.
ROW_BUCKETS_ENV = envs.GLINER_ROW_BUCKETS.name


class RowBuckets:
    """Row counts of the head's matrix products rounded up to a few sizes, with zero rows.

    A step's words, labels and spans differ in number from one step to the next, so every
    product of the head (the word endpoints' MLPs, the span table, the label projections, the
    span x label product) would meet a new problem shape at almost every step. On a GPU each
    new shape costs host time in cuBLAS's kernel selection, many times a launch's in the
    profile of a saturated deberta_gliner server (docs/benchmarks/deberta_gliner.md). Buckets: the next multiple of 1/32 of
    the count's power of two (at least 16), so at most ~6 % more rows and ~16 sizes per
    doubling. Padded rows read row 0 of whatever they index and their results are dropped.
    """

    def __init__(self, active: bool) -> None:
        self.active = active

    @classmethod
    def for_device(cls, device: torch.device) -> RowBuckets:
        """On where the head runs on a GPU, unless ``VLLM_FACTORY_GLINER_ROW_BUCKETS=0``;
        ``=1`` turns it on anywhere."""
        return cls(on_a_gpu_by_default(envs.GLINER_ROW_BUCKETS, device))

    def size(self, rows: int) -> int:
        """``rows`` rounded up to its bucket (itself when off or zero)."""
        if not self.active or rows == 0:
            return rows
        grain = max(16, 1 << max(0, rows.bit_length() - 5))
        return -(-rows // grain) * grain

    def rows(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` with zero rows appended along dim 0 up to its bucket."""
        extra = self.size(tensor.shape[0]) - tensor.shape[0]
        if extra == 0:
            return tensor
        return F.pad(tensor, (0, 0) * (tensor.dim() - 1) + (0, extra))


# On a GPU by default ("0" turns it off): the head's span scoring after the BiLSTM (endpoint
# MLPs, span table, folded labels, span x label products, sigmoid) replayed from CUDA graphs
# (SpanGraphs). "1" also runs the same fixed-shape path eagerly on the CPU (the unit tests).
SPAN_GRAPHS_ENV = envs.GLINER_SPAN_GRAPHS.name
# At most this many span-scoring graphs per head (buckets past it run eagerly).
SPAN_GRAPHS_LIMIT = 64


def span_graphs_wanted(device: torch.device) -> bool:
    """Whether :class:`SpanGraphs` runs for a head on ``device``: on a GPU unless
    ``VLLM_FACTORY_GLINER_SPAN_GRAPHS=0``, on the CPU only with ``=1``. The GPU default
    because it served faster (docs/benchmarks/deberta_gliner.md,
    docs/benchmarks/mt5_gliner.md): the engine's one thread, the limit there, launches one
    graph instead of ~30 kernels a step."""
    return on_a_gpu_by_default(envs.GLINER_SPAN_GRAPHS, device)


class SpanGraphs:
    """The head's span scoring (:meth:`GLiNERSpanHead.span_logits` and the sigmoid) at fixed
    shapes, replayed on a GPU from one CUDA graph per bucket: (word rows rounded up by
    :class:`RowBuckets`, the step's padded label rows, labels per prompt, width, dtype, device,
    span backend).

    Eagerly that part of a step is ~30 launches (six products with cuBLAS's host-side kernel
    choice, the span rows, a gather and a product per span chunk), on the engine's only thread,
    where a served profile found these launches a large share of its samples. A replay is five copies into the bucket's static
    inputs and one launch.

    Static inputs past a step's real rows keep an earlier step's values (or zeros): padded word
    rows only score their own spans (dropped), and an earlier step's ``first`` / ``length`` /
    ``columns`` of the same bucket still index inside the table and the label rows. Only prompts
    with one label count (``columns``) and folded labels come here. On the CPU (tests) the same
    buffers are used and the body runs eagerly instead of a replay. A capture that fails is said
    once and the head scores eagerly from then on."""

    def __init__(self, cuda_graphs: bool, limit: int = SPAN_GRAPHS_LIMIT) -> None:
        self.cuda_graphs = cuda_graphs  # False for an eager server (--enforce-eager)
        self.limit = limit
        self._entries: dict[tuple, tuple[list[torch.Tensor], torch.Tensor, object]] = {}
        self._pool: object = None
        self._failed = False

    def takes(self, words: torch.Tensor) -> bool:
        """Wanted (:func:`span_graphs_wanted`) and usable for ``words``: on a GPU when the
        server may capture graphs (not while another capture runs), or on the CPU (the eager
        fixed-shape path)."""
        if self._failed or not span_graphs_wanted(words.device):
            return False
        if words.is_cuda:
            return self.cuda_graphs and not torch.cuda.is_current_stream_capturing()
        return words.device.type == "cpu"

    def scores(
        self,
        head: GLiNERSpanHead,
        words: torch.Tensor,
        labels: torch.Tensor,
        first: torch.Tensor,
        length: torch.Tensor,
        columns: torch.Tensor,
    ) -> torch.Tensor | None:
        """Sigmoid scores ``[words, max_width, labels per prompt]`` (float32, on ``words``'
        device) of a step's ``words`` ``[N, width]`` against its ``labels`` (all rows; padded
        ones are never picked by ``columns`` ``[N, C]``), or ``None`` where this path does not
        run (not :meth:`takes`, past the graph limit, a failed capture): score eagerly."""
        if not self.takes(words):
            return None
        count = words.shape[0]
        rows = RowBuckets(True).size(count)
        key = (rows, labels.shape[0], columns.shape[1], words.shape[1], words.dtype,
               words.device, span_kernel_backend())  # fmt: skip
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self.limit:
                return None
            try:
                entry = self._entries[key] = self._build(head, *key[:5], words.device)
            except Exception:  # never raise in the engine: score eagerly from now on
                logger.warning("GLiNER span head: CUDA graph capture failed; scores eagerly",
                               exc_info=True)  # fmt: skip
                self._failed = True
                return None
        inputs, out, graph = entry
        for static, value in zip(inputs, (words, labels, first, length, columns)):
            static[: value.shape[0]].copy_(value)
        if graph is None:  # the CPU: the same body on the same buffers, eagerly
            out = self._body(head, inputs)
        else:
            graph.replay()  # type: ignore[attr-defined]
        return out[:count]

    @staticmethod
    def _body(head: GLiNERSpanHead, inputs: list[torch.Tensor]) -> torch.Tensor:
        words, labels, first, length, columns = inputs
        logits = head.span_logits(words, labels, first, length, columns, RowBuckets(False))
        return torch.sigmoid(logits.float())

    def _build(
        self,
        head: GLiNERSpanHead,
        rows: int,
        label_rows: int,
        per_prompt: int,
        width: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> tuple[list[torch.Tensor], torch.Tensor, object]:
        index = {"dtype": torch.long, "device": device}
        inputs = [
            torch.zeros(rows, width, dtype=dtype, device=device),
            torch.zeros(label_rows, width, dtype=dtype, device=device),
            torch.zeros(rows, **index),  # first: padded rows are texts of no words at row 0
            torch.zeros(rows, **index),
            torch.zeros(rows, per_prompt, **index),
        ]
        if device.type != "cuda":
            return inputs, self._body(head, inputs), None
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up: cuBLAS and Triton choose outside the capture
            self._body(head, inputs)
        torch.cuda.current_stream(device).wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            out = self._body(head, inputs)
        logger.info(
            "GLiNER span head: CUDA graph captured for %d word rows x %d labels (%d a prompt)",
            rows, label_rows, per_prompt,
        )  # fmt: skip
        return inputs, out, graph


def fold_labels(num_labels: int, width: int) -> bool:
    """Whether the span MLP's last layer (``4 * width -> width``) is folded into the step's
    label vectors: a span then costs ``4 * width * num_labels`` multiply-adds instead of
    ``4 * width * width + width * num_labels``, fewer while ``3 * num_labels < 4 * width``."""
    return 3 * num_labels < 4 * width


# Span vectors are made this many elements (of out_project's widest activation) at a time:
# on the CPU a chunk that stays in cache (measured: 1 << 22 as fast as one text at a time,
# 1 << 26 18 % slower), on a GPU few and large launches.
SPAN_CHUNK = {"cpu": 1 << 22, "other": 1 << 26}


def span_chunks(
    prompts: Sequence[tuple[slice, slice]], max_width: int, inner: int, budget: int
) -> Iterator[list[tuple[slice, slice]]]:
    """Consecutive prompts (word rows, label columns) grouped so that a group's spans times
    the wider of ``inner`` and its labels stays within ``budget``; a prompt over it alone."""
    group: list[tuple[slice, slice]] = []
    for prompt in prompts:
        if group:
            rows = prompt[0].stop - group[0][0].start
            cols = prompt[1].stop - group[0][1].start
            if rows * max_width * max(inner, cols) > budget:
                yield group
                group = []
        group.append(prompt)
    if group:
        yield group


class StepPlan:
    """Host-side plan of one batched head pass, built from Python and CPU data only.

    Prompts are ordered by descending word count (what a packed LSTM wants). Their words lie
    back to back (``total_words`` rows), and so do their label vectors. Every gather / scatter
    index travels to the device in one copy, so the head never waits on the device mid-step.
    """

    def __init__(
        self,
        order: list[int],
        num_words: list[int],
        num_labels: list[int],
        pooling: str,
        arrays: dict[str, np.ndarray],
    ) -> None:
        self.order, self.num_words, self.num_labels = order, num_words, num_labels
        self.pooling = pooling
        self.batch = len(order)
        self.max_words, self.total_words = max(num_words), sum(num_words)
        self.total_labels = sum(num_labels)
        self.lengths = torch.tensor(num_words, dtype=torch.long)  # CPU, as LSTM packing wants
        self._arrays = arrays

    @classmethod
    def build(
        cls,
        num_tokens: Sequence[int],
        label_positions: Sequence[np.ndarray],
        layouts: Sequence[WordLayout],
        pooling: str,
        labels_in_tokens: bool = True,
    ) -> StepPlan:
        """``num_tokens[i]`` hidden rows, label token positions and word layout of prompt i.
        ``labels_in_tokens=False`` (bi-encoders): ``label_positions`` are rows of the step's
        label table, not token positions.

        A fixed number of NumPy operations on the step's words together, whatever the number
        of prompts: the engine builds one plan per step on its only thread."""
        words_of = np.array([len(layout.counts) for layout in layouts], dtype=np.int64)
        order = np.argsort(-words_of, kind="stable")  # longest first, ties in input order
        num_words = words_of[order]
        batch, max_words = len(order), int(num_words[0])
        token_offsets = np.cumsum([0, *num_tokens[:-1]], dtype=np.int64)[order]
        first_token = np.array([layouts[i].first_token for i in order], dtype=np.int64)
        counts = np.fromiter(
            itertools.chain.from_iterable(layouts[i].counts for i in order),
            dtype=np.int64,
            count=int(num_words.sum()),
        )
        prompt_of_word = np.repeat(np.arange(batch), num_words)
        row_offset = np.cumsum(num_words) - num_words  # first word row of each prompt
        rank = np.arange(len(counts)) - row_offset[prompt_of_word]  # word index in its text
        ends = np.cumsum(counts)
        before_prompt = np.concatenate(([0], ends))[row_offset]  # earlier prompts' word tokens
        starts = (token_offsets + first_token - before_prompt)[prompt_of_word] + ends - counts
        if pooling in ("first", "last"):
            present = np.flatnonzero(counts)
            word_row = (starts if pooling == "first" else starts + counts - 1)[present]
            word_of_row = present
        else:  # every sub-token, reduced into its word's row
            word_row = np.repeat(starts, counts) + _ranks(counts)
            word_of_row = np.repeat(np.arange(len(counts)), counts)
        labels = [np.asarray(label_positions[i], dtype=np.int64) for i in order]
        num_labels = np.array([len(positions) for positions in labels], dtype=np.int64)
        label_row = np.concatenate(labels)
        if labels_in_tokens:
            label_row = label_row + np.repeat(token_offsets, num_labels)
        arrays = {
            "label_row": label_row,
            "word_row": word_row,
            "word_of_row": word_of_row,
            "word_slot": prompt_of_word * max_words + rank,
            "first": row_offset[prompt_of_word],
            "length": num_words[prompt_of_word],
            # the step-wide column of the first label of each word's prompt
            "label_start": (np.cumsum(num_labels) - num_labels)[prompt_of_word],
        }
        return cls(order.tolist(), num_words.tolist(), num_labels.tolist(), pooling, arrays)

    def label_columns(self, index: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """``[words, labels]``: the step-wide label columns of each word's prompt, when every
        prompt has the same number of labels (else None)."""
        if len(set(self.num_labels)) != 1:
            return None
        count = self.num_labels[0]
        offsets = torch.arange(count, device=index["label_start"].device)
        return index["label_start"].unsqueeze(1) + offsets

    def split(self, flat: torch.Tensor, max_width: int) -> list[torch.Tensor]:
        """Per prompt, in input order, its ``[words, max_width, labels]`` block of ``flat``
        (the prompts' blocks back to back, in plan order): views, no copy."""
        out: list[torch.Tensor | None] = [None] * self.batch
        at = 0
        for original, words, labels in zip(self.order, self.num_words, self.num_labels):
            size = words * max_width * labels
            out[original] = flat[at : at + size].view(words, max_width, labels)
            at += size
        return out  # type: ignore[return-value]

    def blocks(self) -> Iterator[tuple[int, slice, slice]]:
        """(input index, word rows, label columns) of every prompt."""
        rows = columns = 0
        for original, words, labels in zip(self.order, self.num_words, self.num_labels):
            yield original, slice(rows, rows + words), slice(columns, columns + labels)
            rows, columns = rows + words, columns + labels

    def device_index(self, device: torch.device) -> dict[str, torch.Tensor]:
        """Every index on ``device``, through one (pinned, asynchronous) host-to-device copy."""
        names = list(self._arrays)
        flat = torch.from_numpy(np.concatenate([self._arrays[n].astype(np.int64) for n in names]))
        if device.type == "cuda":
            flat = flat.pin_memory().to(device, non_blocking=True)
        else:
            flat = flat.to(device)
        parts = flat.split([len(self._arrays[n]) for n in names])
        return dict(zip(names, parts))


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., c - 1 for every c in ``counts``, concatenated."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
