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

The BiLSTM's ways of running are in :mod:`~vllm_factory.heads.gliner.word_lstm`, the GPU side
of span scoring (row buckets, CUDA graphs, the span kernel's backend) in
:mod:`~vllm_factory.heads.gliner.span_graphs`, the step's host-side plan in
:mod:`~vllm_factory.heads.gliner.step_plan`.

Module and parameter names follow gliner's state dict (``token_rep_layer.projection``,
``rnn.lstm``, ``span_rep_layer.span_rep_layer.project_start``, ``prompt_rep_layer``), so
loading is a lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest
from vllm_factory.heads.gliner.labels import (
    LabelEncoderModule,
    LabelVectorCache,
    cache_size_from_env,
    encode_labels,
    label_ids_for,
)
from vllm_factory.heads.gliner.prompts import WordLayout, layout_for
from vllm_factory.heads.gliner.relex import (
    RelationsRepLayer,
    relation_positions,
    relations,
    relex_thresholds,
)
from vllm_factory.heads.gliner.settings import GLiNERSettings
from vllm_factory.heads.gliner.span_graphs import RowBuckets, SpanGraphs, span_kernel_backend
from vllm_factory.heads.gliner.step_plan import StepPlan
from vllm_factory.heads.gliner.token_level import TokenScorer
from vllm_factory.heads.gliner.word_lstm import WordLSTM
from vllm_factory.kernels import span_logits

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

    def logits(
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
        not by its words times the labels of all its prompts. A chunk's product is its words
        times all its prompts' labels: on a GPU fewer and larger launches pay for the extra
        arithmetic; on the CPU they do not, and each prompt is a chunk of its own."""
        total, max_width = first.shape[0], self.max_width
        table = self.span_table(*self.endpoints(words))
        span_rows = self.span_rows(first, length, words.shape[0])
        last = self.out_project[3]
        inner = table.shape[-1]
        if num_labels is None or fold_labels(num_labels, words.shape[-1]):
            weight, bias = labels @ last.weight, labels @ last.bias  # [labels, inner], [labels]
        else:
            weight, bias = None, None
            labels = labels[:num_labels]
        if prompts is None:
            prompts = [(slice(0, total), slice(0, labels.shape[0]))]
        on_cpu = words.device.type == "cpu"
        budget = SPAN_CHUNK["cpu" if on_cpu else "other"]
        groups = (
            [[p] for p in prompts] if on_cpu else span_chunks(prompts, max_width, inner, budget)
        )
        parts = []
        for group in groups:
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
                    logits = last(self.span_hidden(table, chosen)) @ labels[cols].T
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


def to_host(parts: list[torch.Tensor]) -> list[torch.Tensor]:
    """``parts`` on the CPU in one copy: flattened and joined (their shapes differ in more
    than the first dimension, e.g. a token-level step's prompts with different label counts),
    then split and shaped again."""
    shapes = [part.shape for part in parts]
    flat = torch.cat([part.flatten() for part in parts]).to("cpu", non_blocking=True)
    pieces = flat.split([part.numel() for part in parts])
    return [piece.view(shape) for piece, shape in zip(pieces, shapes, strict=True)]


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
        if settings.token_level:  # gliner's token model: a (word, label) scorer, no span layer
            self.scorer = TokenScorer(width)
        else:
            self.span_rep_layer = SpanRepLayer(width, settings.max_width)
            self.prompt_rep_layer = projection(width)
        if settings.relex:  # gliner's relex span model: entity pairs scored per relation label
            self.pair_rep_layer = projection(2 * width, width)
            if settings.relations_layer != "none":
                self.relations_rep_layer = RelationsRepLayer(width, settings.relations_layer)
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
            kept: dict[str, torch.Tensor] | None = {} if self.settings.relex else None
            for (i, _, _), scores in zip(scored, self.score(hidden, plan, label_table, kept)):
                outputs[i] = scores
            if kept is not None:
                self.add_relations(outputs, scored, hidden, requests, plan, kept)
        return outputs  # type: ignore[return-value]

    def add_relations(
        self,
        outputs: list[torch.Tensor | None],
        scored: Sequence[tuple[int, WordLayout, np.ndarray]],
        hidden: Sequence[torch.Tensor],
        requests: Sequence[PoolerRequest],
        plan: StepPlan,
        kept: dict[str, torch.Tensor],
    ) -> None:
        """Relex checkpoints: each scored prompt that came with its thresholds gets its packed
        entities-and-relations output (:func:`~vllm_factory.heads.gliner.relex.relations`)
        in place of its span scores. ``kept``: the step's token and word vectors
        (:meth:`score`)."""
        offsets = np.cumsum([0, *[h.shape[0] for h in hidden[:-1]]])
        settings = self.settings
        if kept["words"].is_cuda:  # the span scores reach the host by a non-blocking copy
            torch.cuda.current_stream(kept["words"].device).synchronize()
        for original, rows, _ in plan.blocks():
            i = scored[original][0]
            request = requests[i]
            thresholds = relex_thresholds(request.extra)
            if thresholds is None:
                continue
            positions = relation_positions(
                request.token_ids, settings.rel_token_index, settings.embed_rel_token
            )
            positions = positions[
                positions < min(hidden[original].shape[0], len(request.token_ids))
            ]
            vectors = kept["tokens"][
                torch.from_numpy(positions + offsets[original]).to(kept["tokens"].device)
            ]
            with torch.no_grad():
                outputs[i] = relations(self, outputs[i], kept["words"][rows], vectors, thresholds)

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

    @property
    def dtype(self) -> torch.dtype:
        """The head's compute dtype (its label-side weights')."""
        if self.settings.token_level:
            return self.scorer.proj_label.weight.dtype
        return self.prompt_rep_layer[0].weight.dtype

    def no_scores(self, request: PoolerRequest, device: torch.device) -> torch.Tensor:
        """The well-formed empty result of an unscored prompt: ``[0, max_width, num_labels]``
        (token-level: ``[0, num_labels, 3]``)."""
        labels = 0
        if self.settings.bi_encoder:
            labels = len(label_ids_for(request.extra, **self.label_limits) or ())
        elif request.token_ids is not None:
            labels = int((request.token_ids == self.settings.class_token_index).sum())
        if self.settings.token_level:
            return torch.zeros((0, labels, 3), device=device)
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
        kept: dict[str, torch.Tensor] | None = None,
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
        BiLSTM is replayed from a CUDA graph per bucket (:class:`SpanGraphs`). ``kept``: if
        given, receives the step's ``tokens`` (after the projection) and ``words`` (after the
        BiLSTM), which relex checkpoints pair entities with."""
        tokens = (torch.cat(list(hidden)) if len(hidden) > 1 else hidden[0]).to(self.dtype)
        pad = RowBuckets.for_device(tokens.device)
        if self.settings.has_projection:
            tokens = self.token_rep_layer.projection(pad.rows(tokens))
        index = plan.device_index(tokens.device)
        if self.settings.token_level:
            return self.token_scores(tokens, plan, index)
        label_row = pad.rows(index["label_row"])  # padded rows read token (or label) 0
        if label_table is None:  # [labels of the step (padded), width]
            labels = self.prompt_rep_layer(tokens[label_row])
        else:
            labels = label_table[label_row]
        words = self.contextual_words(tokens, plan, index)
        if kept is not None:
            kept.update(tokens=tokens, words=words)
        max_width = self.span_rep_layer.span_rep_layer.max_width
        columns = plan.label_columns(index)  # [words, labels per prompt] or None
        scores = None
        if columns is not None and fold_labels(plan.total_labels, words.shape[-1]):
            scores = self.span_graphs.scores(
                self, words, labels, index["first"], index["length"], columns
            )
        if scores is None:
            logits = self.span_rep_layer.span_rep_layer.logits(
                pad.rows(words), labels, index["first"], index["length"], columns, pad,
                plan.total_labels, [(rows, cols) for _, rows, cols in plan.blocks()],
            )  # fmt: skip
            scores = torch.sigmoid(logits.float())
        if scores.device.type != "cpu":  # vLLM syncs before it reads a pooler output
            scores = scores.to("cpu", non_blocking=True)
        return plan.split(scores.flatten(), max_width)

    def contextual_words(
        self, tokens: torch.Tensor, plan: StepPlan, index: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """``[words of the step, width]``: the word vectors, through the BiLSTM if the
        checkpoint runs one (over the padded batch)."""
        words = self.word_vectors(tokens, plan, index)
        if self.settings.runs_rnn:
            padded = words.new_zeros(plan.batch * plan.max_words, words.shape[-1])
            padded[index["word_slot"]] = words
            padded = self.rnn(padded.view(plan.batch, plan.max_words, -1), plan.lengths)
            words = padded.flatten(0, 1)[index["word_slot"]]
        return words

    def token_scores(
        self, tokens: torch.Tensor, plan: StepPlan, index: dict[str, torch.Tensor]
    ) -> list[torch.Tensor]:
        """Token-level checkpoints: sigmoid start / end / inside scores ``[num_words,
        num_labels, 3]`` (float32, on the CPU) per prompt of ``plan``, in its input order. The
        label vectors are the ``<<ENT>>`` token vectors themselves (gliner's token model has no
        ``prompt_rep_layer``); each prompt's words are scored against its own labels."""
        labels = tokens[index["label_row"]]  # [labels of the step, width]
        words = self.contextual_words(tokens, plan, index)
        out: list[torch.Tensor | None] = [None] * plan.batch
        for original, rows, columns in plan.blocks():
            logits = self.scorer.logits(words[rows], labels[columns])
            out[original] = torch.sigmoid(logits.float())
        if words.device.type != "cpu":
            return to_host(out)  # type: ignore[arg-type]
        return out  # type: ignore[return-value]

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
