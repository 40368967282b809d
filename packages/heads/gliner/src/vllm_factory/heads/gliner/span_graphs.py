"""The GPU side of the GLiNER head's span scoring: the span kernel's backend, row buckets (few
problem shapes for cuBLAS) and the span scoring replayed from one CUDA graph per bucket; the
switches that turn them on by device (``vllm_factory.core.envs``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from vllm_factory.core import envs
from vllm_factory.heads.gliner.bucket_graphs import BucketGraphs, Recipe

if TYPE_CHECKING:
    from vllm_factory.heads.gliner.head import GLiNERSpanHead

logger = logging.getLogger(__name__)


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
    """The head's span scoring (:meth:`MarkerV0.logits` and the sigmoid) at fixed
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
        self.graphs = BucketGraphs("GLiNER span head", "scores eagerly", limit)

    def takes(self, words: torch.Tensor) -> bool:
        """Wanted (:func:`span_graphs_wanted`) and usable for ``words``: on a GPU when the
        server may capture graphs (not while another capture runs), or on the CPU (the eager
        fixed-shape path)."""
        if self.graphs.failed or not span_graphs_wanted(words.device):
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
        bucket = self.graphs.bucket(
            key, words.device, lambda: self._recipe(head, *key[:5], words.device)
        )
        if bucket is None:
            return None
        for static, value in zip(bucket.inputs, (words, labels, first, length, columns)):
            static[: value.shape[0]].copy_(value)
        if bucket.graph is None:  # the CPU: the same body on the same buffers, eagerly
            return self._body(head, bucket.inputs)[:count]
        bucket.graph.replay()
        return bucket.out[:count]

    @staticmethod
    def _body(head: GLiNERSpanHead, inputs: list[torch.Tensor]) -> torch.Tensor:
        words, labels, first, length, columns = inputs
        logits = head.span_rep_layer.span_rep_layer.logits(
            words, labels, first, length, columns, RowBuckets(False)
        )
        return torch.sigmoid(logits.float())

    def _recipe(
        self,
        head: GLiNERSpanHead,
        rows: int,
        label_rows: int,
        per_prompt: int,
        width: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> Recipe:
        index = {"dtype": torch.long, "device": device}
        inputs = [
            torch.zeros(rows, width, dtype=dtype, device=device),
            torch.zeros(label_rows, width, dtype=dtype, device=device),
            torch.zeros(rows, **index),  # first: padded rows are texts of no words at row 0
            torch.zeros(rows, **index),
            torch.zeros(rows, per_prompt, **index),
        ]
        what = f"{rows} word rows x {label_rows} labels ({per_prompt} a prompt)"
        return inputs, lambda static: self._body(head, static), what
