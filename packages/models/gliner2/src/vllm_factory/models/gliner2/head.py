"""The GLiNER2 span architecture's heads as one ``FactoryPooler`` (pure torch, no vLLM import).

Per prompt, from the encoder's token states and the prompt layout (:mod:`.prompts`):

- word vectors: the state of each text word's first sub-token;
- per span task (entities, a structure, a relation): the [P] state -> ``count_pred`` (an MLP,
  argmax over 20 = how many instances); the field-marker states -> ``count_embed`` (a GRU over
  the instance index started from each field state, then an MLP) -> one query per instance and
  field; entities use the first instance only;
- span scores: every (start word, width < max_width) span against every query, through the
  ``markerV0`` span layer factorised as the library scores it (the first linear of
  ``out_project`` split into its start and end halves, the last folded into the queries);
  ``sigmoid``; spans that run past the text score 0;
- per classification: the label-marker states -> ``classifier`` (an MLP) -> one logit each.

All prompts of a step share the MLPs, the count head and the GRU (one call each); the span
scoring runs per prompt (its own words and queries). One device-to-host copy per step: the
predicted counts, which decide the query shapes.

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

import torch
import torch.nn.functional as F
from torch import nn
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest
from vllm_factory.core.weights import load_by_name
from vllm_factory.heads.gliner.head import SpanRepLayer
from vllm_factory.heads.gliner.prompts import prompt_key
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
        offsets, total = [], 0
        for h in hidden:
            offsets.append(total)
            total += h.shape[0]
        # Host-side index lists, copied to the device once.
        word_rows, count_rows, field_rows, label_rows = [], [], [], []
        for offset, layout in zip(offsets, layouts):
            word_rows += [offset + p for p in layout.word_positions]
            for kind, markers in layout.tasks:
                if kind == KIND_CLASSES:
                    label_rows += [offset + p for p in markers[1:]]
                else:
                    count_rows.append(offset + markers[0])
                    field_rows += [offset + p for p in markers[1:]]
        sizes = [len(word_rows), len(count_rows), len(field_rows), len(label_rows)]
        index = torch.tensor(word_rows + count_rows + field_rows + label_rows, dtype=torch.long)
        if device.type == "cuda":
            index = index.pin_memory().to(device, non_blocking=True)
        else:
            index = index.to(device)
        word_index, count_index, field_index, label_index = index.split(sizes)

        counts: list[int] = []
        if count_rows:
            counts = self.count_pred(tokens[count_index]).argmax(-1).tolist()  # the one sync
        logits = None
        if label_rows:
            logits = self.classifier(tokens[label_index]).squeeze(-1).float()

        # Queries of every span task with a count, from one GRU run over the largest count.
        task_fields = [
            len(markers) - 1 for layout in layouts for kind, markers in layout.tasks
            if kind != KIND_CLASSES
        ]  # fmt: skip
        steps = max([min(c, MAX_COUNT) for c in counts], default=0)
        queries = None
        if steps > 0:
            queries = self.count_embed(tokens[field_index], steps)  # [steps, all fields, width]

        marker = self.span_rep.span_rep_layer
        first = marker.out_project[0]
        width = tokens.shape[-1]
        words = tokens[word_index]
        start_hidden = F.linear(marker.project_start(words).relu(), first.weight[:, :width])
        end_hidden = F.linear(marker.project_end(words).relu(), first.weight[:, width:])
        last = marker.out_project[3]

        results = []
        span_task = field_at = label_at = word_at = 0
        for layout in layouts:
            n_words = len(layout.word_positions)
            task_counts: list[float] = []
            blocks: list[torch.Tensor] = []
            prompt_queries: list[torch.Tensor] = []
            shapes: list[tuple[int, int]] = []
            for kind, markers in layout.tasks:
                fields = len(markers) - 1
                if kind == KIND_CLASSES:
                    task_counts.append(0.0)
                    continue
                count = min(counts[span_task], MAX_COUNT)
                task_counts.append(float(counts[span_task]))
                if count > 0:
                    used = 1 if kind == KIND_ENTITIES else count
                    block = queries[:used, field_at : field_at + fields]  # type: ignore[index]
                    prompt_queries.append(block.reshape(used * fields, width))
                    shapes.append((used, fields))
                field_at += task_fields[span_task]
                span_task += 1
            if prompt_queries:
                scores = self._span_scores(
                    start_hidden[word_at : word_at + n_words],
                    end_hidden[word_at : word_at + n_words],
                    torch.cat(prompt_queries),
                    first.bias,
                    last,
                )  # [queries, words, max_width]
                at = 0
                for used, fields in shapes:
                    blocks.append(scores[at : at + used * fields].flatten())
                    at += used * fields
            for kind, markers in layout.tasks:
                if kind == KIND_CLASSES:
                    n = len(markers) - 1
                    blocks.append(logits[label_at : label_at + n])  # type: ignore[index]
                    label_at += n
            word_at += n_words
            head = torch.tensor(task_counts, dtype=torch.float32).to(device, non_blocking=True)
            results.append(torch.cat([head, *blocks]) if blocks else head)
        return results

    def _span_scores(
        self,
        start_hidden: torch.Tensor,
        end_hidden: torch.Tensor,
        queries: torch.Tensor,
        bias: torch.Tensor | None,
        last: nn.Linear,
    ) -> torch.Tensor:
        """Sigmoid scores [queries, words, max_width] of one prompt (float32; 0 past the end)."""
        n_words, inner = end_hidden.shape
        max_width = self.max_width
        padded = F.pad(end_hidden, (0, 0, 0, max_width - 1))
        windows = padded.unfold(0, max_width, 1).permute(0, 2, 1)  # [words, max_width, inner]
        joined = start_hidden.unsqueeze(1) + windows
        if bias is not None:
            joined = joined + bias
        joined = joined.relu().reshape(n_words * max_width, inner)
        folded = queries @ last.weight  # [queries, inner]
        logits = joined @ folded.T  # [words * max_width, queries]
        if last.bias is not None:
            logits = logits + queries @ last.bias
        logits = logits.T.reshape(-1, n_words, max_width).float()
        starts = torch.arange(n_words, device=logits.device).unsqueeze(1)
        widths = torch.arange(max_width, device=logits.device).unsqueeze(0)
        valid = starts + widths < n_words
        return torch.sigmoid(logits).masked_fill(~valid, 0.0)
