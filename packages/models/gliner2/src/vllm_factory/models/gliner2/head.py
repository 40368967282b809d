"""The GLiNER2 span architecture's heads as one ``FactoryPooler`` (pure torch, no vLLM import).

Per prompt, from the encoder's token states and the prompt layout (:mod:`.prompts`):

- word vectors: the state of each text word's first sub-token;
- per span task (entities, a structure, a relation): the [P] state -> ``count_pred`` (an MLP,
  argmax over 20 = how many instances); the field-marker states -> ``count_embed`` (a GRU over
  the instance index started from each field state, then an MLP) -> one query per instance and
  field; entities use the first instance only;
- span scores: every (start word, width < max_width) span against every query of its prompt,
  through the ``markerV0`` span layer as the GLiNER head scores it
  (:meth:`~vllm_factory.heads.gliner.head.MarkerV0.logits`: the span MLP's first layer made per
  word, its last folded into the queries, the step's prompts a chunk at a time); ``sigmoid``;
  spans that run past the text score 0;
- per classification: the label-marker states -> ``classifier`` (an MLP) -> one logit each.

All prompts of a step share the MLPs, the count head, the GRU and the span scoring; per prompt
there is one launch left, the product that writes its scores into the step's output. One
device-to-host synchronisation per step: the predicted counts, which decide the queries.

Output per prompt: one float32 vector ``[count per task] + [scores of each span task with a
count, (count, fields, words, max_width) flattened] + [logits of each classification]``
(entities: count 1 in the shape). The IOProcessor knows the rest of the shapes. A prompt
without a usable layout (vLLM's start-up dummy runs) gets an empty vector.

Module and parameter names follow the library's state dict (``span_rep.span_rep_layer.*``,
``classifier.*``, ``count_pred.*``, ``count_embed.*``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest
from vllm_factory.core.weights import load_by_name
from vllm_factory.heads.gliner.head import SpanRepLayer
from vllm_factory.heads.gliner.prompts import prompt_key
from vllm_factory.heads.gliner.span_graphs import RowBuckets
from vllm_factory.heads.gliner.step_plan import indices_on
from vllm_factory.models.gliner2.prompts import (
    KIND_CLASSES,
    KIND_ENTITIES,
    PromptLayout,
    layout_for,
)

logger = logging.getLogger(__name__)

MAX_COUNT = 20


def mlp(width: int, inner: int, out: int) -> nn.Sequential:
    """The library's ``create_mlp`` without dropout: Linear, ReLU, Linear."""
    return nn.Sequential(nn.Linear(width, inner), nn.ReLU(), nn.Linear(inner, out))


class GRUWeights(nn.Module):
    """A one-layer GRU's parameters under ``nn.GRU``'s names."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight_ih_l0 = nn.Parameter(torch.empty(3 * width, width))
        self.weight_hh_l0 = nn.Parameter(torch.empty(3 * width, width))
        self.bias_ih_l0 = nn.Parameter(torch.empty(3 * width))
        self.bias_hh_l0 = nn.Parameter(torch.empty(3 * width))

    def run(self, inputs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``inputs`` [steps, width] (the same for every row), ``state`` [rows, width] ->
        the state after each step, [steps, rows, width]."""
        gates_in = F.linear(inputs, self.weight_ih_l0, self.bias_ih_l0)  # [steps, 3 width]
        out = []
        for step in range(inputs.shape[0]):
            in_r, in_z, in_n = gates_in[step].chunk(3, dim=-1)
            hid_r, hid_z, hid_n = F.linear(state, self.weight_hh_l0, self.bias_hh_l0).chunk(3, -1)
            reset = torch.sigmoid(in_r + hid_r)
            update = torch.sigmoid(in_z + hid_z)
            new = torch.tanh(in_n + reset * hid_n)
            state = (1 - update) * new + update * state
            out.append(state)
        return torch.stack(out)


class CountEmbedding(nn.Module):
    """The library's ``count_lstm`` layer: instance-index embeddings through a GRU started
    from each field's state, joined with the field state by an MLP."""

    def __init__(self, width: int, max_count: int = MAX_COUNT) -> None:
        super().__init__()
        self.pos_embedding = nn.Embedding(max_count, width)
        self.gru = GRUWeights(width)
        self.projector = mlp(2 * width, 4 * width, width)

    def forward(self, fields: torch.Tensor, steps: int) -> torch.Tensor:
        """``fields`` [rows, width] -> [steps, rows, width]. Each step depends only on the
        earlier ones, so rows needing fewer instances take a prefix of the result."""
        index = torch.arange(steps, device=fields.device)
        states = self.gru.run(self.pos_embedding(index), fields)
        joined = torch.cat([states, fields.unsqueeze(0).expand_as(states)], dim=-1)
        return self.projector(joined)


class GLiNER2Head(FactoryPooler):
    needs_token_ids = True  # layouts are keyed by a digest of the prompt's tokens
    _logged: ClassVar[set[str]] = set()

    def __init__(self, width: int, max_width: int, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.max_width = max_width
        self.span_rep = SpanRepLayer(width, max_width)
        self.classifier = mlp(width, 2 * width, 1)
        self.count_pred = mlp(width, 2 * width, MAX_COUNT)
        self.count_embed = CountEmbedding(width)
        if dtype is not None:
            self.to(dtype)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load the library's head names; every parameter must be in the checkpoint."""
        return load_by_name(self, weights, strict=True)

    # -- forward ------------------------------------------------------------------------------

    def forward(
        self, hidden_states: Sequence[torch.Tensor], requests: Sequence[PoolerRequest]
    ) -> list[torch.Tensor]:
        outputs: list[torch.Tensor | None] = [None] * len(requests)
        scored: list[tuple[int, PromptLayout]] = []
        for i, (hidden, request) in enumerate(zip(hidden_states, requests)):
            layout = None
            if request.token_ids is not None:
                layout = layout_for(request.extra, prompt_key(request.token_ids))
            rows = hidden.shape[0] if request.token_ids is None else min(
                hidden.shape[0], len(request.token_ids)
            )  # fmt: skip
            if layout is None or layout.max_position() >= rows or not layout.word_positions:
                self._log_unscored(layout)
                outputs[i] = hidden.new_zeros(0, dtype=torch.float32)
            else:
                scored.append((i, layout))
        if scored:
            results = self.score([hidden_states[i] for i, _ in scored], [lay for _, lay in scored])
            for (i, _), result in zip(scored, results):
                outputs[i] = result
        return outputs  # type: ignore[return-value]

    @classmethod
    def _log_unscored(cls, layout: PromptLayout | None) -> None:
        kind = "absent" if layout is None else "mismatched"
        if kind not in cls._logged:
            cls._logged.add(kind)
            logger.info(
                "GLiNER2 head: a prompt with %s layout gets an empty result (vLLM's start-up "
                "dummy runs; real requests carry one through the GLiNER2 IOProcessor)",
                "no" if layout is None else "a mismatched",
            )

    def score(
        self, hidden: Sequence[torch.Tensor], layouts: Sequence[PromptLayout]
    ) -> list[torch.Tensor]:
        dtype = self.classifier[0].weight.dtype
        device = hidden[0].device
        tokens = (torch.cat(list(hidden)) if len(hidden) > 1 else hidden[0]).to(dtype)
        pad = RowBuckets.for_device(device)
        offsets = np.cumsum([0, *[h.shape[0] for h in hidden[:-1]]]).tolist()
        n_words = [len(layout.word_positions) for layout in layouts]
        # Host-side index lists, copied to the device once: the rows of the words, the [P]
        # markers, the span fields and the class labels; each word row's text (its first row
        # and its length, for MarkerV0.span_rows).
        word_rows, count_rows, field_rows, label_rows = [], [], [], []
        for offset, layout in zip(offsets, layouts):
            word_rows += [offset + p for p in layout.word_positions]
            for kind, markers in layout.tasks:
                if kind == KIND_CLASSES:
                    label_rows += [offset + p for p in markers[1:]]
                else:
                    count_rows.append(offset + markers[0])
                    field_rows += [offset + p for p in markers[1:]]
        first = np.repeat(np.cumsum([0, *n_words[:-1]]), n_words)
        length = np.repeat(n_words, n_words)
        word_index, count_index, field_index, label_index, first_row, text_length = indices_on(
            [word_rows, count_rows, field_rows, label_rows, first, length], device
        )

        counts: list[int] = []
        predicted = None
        if count_rows:
            predicted = self.count_pred(tokens[count_index]).argmax(-1)
            counts = predicted.tolist()  # the one sync
        logits = None
        if label_rows:
            logits = self.classifier(tokens[label_index]).squeeze(-1).float()

        # Each prompt's queries (its span tasks' in order, instance by instance), as rows of
        # one GRU run over the largest count, [steps * all fields, width].
        steps = max([min(c, MAX_COUNT) for c in counts], default=0)
        query_rows: list[int] = []
        per_prompt: list[tuple[int, int, int]] = []  # tasks, queries, class labels
        span_task = field_at = 0
        for layout in layouts:
            queries_before, labels = len(query_rows), 0
            for kind, markers in layout.tasks:
                fields = len(markers) - 1
                if kind == KIND_CLASSES:
                    labels += fields
                    continue
                count = min(counts[span_task], MAX_COUNT)
                used = 1 if kind == KIND_ENTITIES else count
                for instance in range(used if count > 0 else 0):
                    at = instance * len(field_rows) + field_at
                    query_rows += range(at, at + fields)
                field_at += fields
                span_task += 1
            per_prompt.append((len(layout.tasks), len(query_rows) - queries_before, labels))

        # Each prompt's vector in one zeroed step buffer: the span tasks' counts and the class
        # logits put in place by one indexed copy each (a classification's count stays 0),
        # each prompt's span scores written query-major with spans past its text zeroed by one
        # fused product; to the host in one copy (vLLM syncs before it reads a pooler output).
        sizes = [tasks + n * self.max_width * q + labels
                 for n, (tasks, q, labels) in zip(n_words, per_prompt)]  # fmt: skip
        starts = np.cumsum([0, *sizes[:-1]])
        count_at = [
            start + i
            for start, layout in zip(starts.tolist(), layouts)
            for i, (kind, _) in enumerate(layout.tasks)
            if kind != KIND_CLASSES
        ]
        label_at = [
            end - i
            for end, (_, _, labels) in zip((starts + sizes).tolist(), per_prompt)
            for i in range(labels, 0, -1)
        ]
        count_to, label_to, query_index = indices_on([count_at, label_at, query_rows], device)
        out = torch.zeros(sum(sizes), dtype=torch.float32, device=device)
        if predicted is not None:
            out.index_copy_(0, count_to, predicted.float())
        if logits is not None:
            out.index_copy_(0, label_to, logits)
        if query_rows:
            queries = self.count_embed(tokens[field_index], steps).reshape(-1, tokens.shape[-1])
            queries = queries[query_index]
            prompts, word_at, query_at = [], 0, 0
            for n, (_, q, _) in zip(n_words, per_prompt):
                if q:
                    prompts.append((slice(word_at, word_at + n), slice(query_at, query_at + q)))
                word_at += n
                query_at += q
            # The span MLP's last layer folded into the queries: a span meets its own prompt's
            # queries only, far fewer than 4/3 of the width (fold_labels).
            flat = self.span_rep.span_rep_layer.logits(
                pad.rows(tokens[word_index]), pad.rows(queries), first_row, text_length, None,
                pad, None, prompts,
            )  # fmt: skip
            scores = torch.sigmoid(flat.float())  # each prompt's [words, max_width, queries]
            widths = torch.arange(self.max_width, device=device)
            word = torch.arange(len(word_rows), device=device) - first_row
            inside = (word.unsqueeze(1) + widths < text_length.unsqueeze(1)).float()
            score_at = word_at = 0
            for n, (tasks, q, _), start in zip(n_words, per_prompt, starts.tolist()):
                if q:
                    grid = n * self.max_width * q
                    torch.mul(
                        scores[score_at : score_at + grid]
                        .view(n, self.max_width, q)
                        .permute(2, 0, 1),
                        inside[word_at : word_at + n],
                        out=out[start + tasks : start + tasks + grid].view(q, n, self.max_width),
                    )
                    score_at += grid
                word_at += n
        if out.device.type != "cpu":
            out = out.to("cpu", non_blocking=True)
        return list(out.split(sizes))
