"""The GLiNER head's word BiLSTM and the ways it runs: cuDNN eagerly, replayed from CUDA graphs
per bucket, with the kernels' per-step recurrence inside those graphs for a 16-bit head; and
the switches that choose between them (``vllm_factory.core.envs``)."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from vllm_factory.core import envs
from vllm_factory.heads.gliner.bucket_graphs import BucketGraphs, Recipe
from vllm_factory.kernels import bidirectional_lstm, select_backend

logger = logging.getLogger(__name__)


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
        self.graphs = BucketGraphs("GLiNER BiLSTM", "runs cuDNN packed")
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
            self.cuda_graphs and words.is_cuda and lstm_graphs_wanted() and not self.graphs.failed
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
        bucket = self.graphs.bucket(key, words.device, lambda: self._recipe(*key))
        if bucket is None:
            return None
        inputs, ends = bucket.inputs
        inputs[:batch, :steps].copy_(words)
        ends[:batch].copy_(lengths.to(torch.long).pin_memory(), non_blocking=True)
        bucket.graph.replay()  # type: ignore[union-attr]
        return bucket.out[:batch, :steps].clone()

    def _recipe(
        self,
        batch: int,
        steps: int,
        width: int,
        dtype: torch.dtype,
        device: torch.device,
        two_streams: bool,
        step_kernel: bool,
    ) -> Recipe:
        """A bucket's static word vectors and text lengths, and what its graph holds: the
        per-step kernel (both directions at once), or cuDNN's two directions, on two streams
        where asked."""
        static = [torch.zeros(batch, steps, width, dtype=dtype, device=device),
                  torch.zeros(batch, dtype=torch.long, device=device)]  # fmt: skip
        if step_kernel:
            return (
                static,
                lambda s: self.by_kernel(*s, backend="triton", per_step=True),
                (f"{batch} texts x {steps} words, the per-step kernel"),
            )
        if two_streams and self._branch is None:
            self._branch = torch.cuda.Stream(device)
        branch = self._branch if two_streams else None
        how = ", directions on two streams" if branch is not None else ""
        return (
            static,
            lambda s: self.by_directions(*s, branch),
            f"{batch} texts x {steps} words{how}",
        )

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
