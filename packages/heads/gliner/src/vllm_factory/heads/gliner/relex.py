"""Relation extraction of gliner's relex span model (``UniEncoderSpanRelexGLiNER``,
``relations_layer`` set): entities and the relations between them from one forward pass.

gliner's model, after the span x label scores: every span whose best label scores above the
entity threshold becomes a relation candidate (in span order: start, then width); an
adjacency layer over the candidates' span vectors keeps the ordered pairs (head, tail) whose
adjacency is above the adjacency threshold (``relations_layer: "none"``: every pair); each
kept pair's vector, a projection of its head and tail span vectors joined, is scored against
the relation labels' ``<<REL>>`` token vectors. A relation is a kept pair and label above the
relation threshold whose head and tail are both among the decoded entities.

What the engine sends back for a relex prompt is one flat float32 tensor (:func:`pack`):
the span scores, then the candidates' word spans, the kept pairs and their relation scores;
the IOProcessor takes it apart (:func:`unpack`) knowing the prompt's words and labels.
Pure torch, no vLLM import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from vllm_factory.heads.gliner.settings import RELATION_LAYERS

__all__ = ["RELATION_LAYERS", "RELEX_KEY", "pack", "relations", "unpack"]

# Key of a relex request's thresholds inside ``PoolingParams.extra_kwargs``:
# [entity threshold, adjacency threshold].
RELEX_KEY = "gliner_relex"
# Candidate entities a prompt may pair: their ordered pairs are scored against every relation
# label, so the pairs (at most this squared) bound the work and memory of a prompt.
MAX_RELATION_ENTITIES = 512
# Pairs projected and scored at a time (bounds the pair projection's activations).
PAIR_CHUNK = 4096
# Header of the relation part of a packed output: candidates, pairs (-1 candidates: more than
# MAX_RELATION_ENTITIES scored above the threshold, their number in the pairs slot).
HEADER = 2


class DotAdjacency(nn.Module):
    """sigmoid(X X^T)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x @ x.T)


class BilinearAdjacency(nn.Module):
    """sigmoid(Z Z^T), Z a linear projection of X (gliner's ``proj``)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.proj(x)
        return torch.sigmoid(z @ z.T)


class MLPAdjacency(nn.Module):
    """sigmoid(MLP([x_i; x_j])) for every ordered pair (gliner's ``mlp``). The first layer acts
    on the two halves apart (``W [a; b] + c == W_a a + (W_b b + c)``), made once per
    candidate, and the pairs are scored ``PAIR_CHUNK`` at a time: no ``[E, E, 2 * width]``
    tensor."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(2 * width, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, last = self.mlp[0], self.mlp[2]
        width = x.shape[-1]
        heads = x @ first.weight[:, :width].T  # [E, hidden]
        tails = torch.nn.functional.linear(x, first.weight[:, width:], first.bias)
        rows = max(1, PAIR_CHUNK // max(1, x.shape[0]))
        out = [
            last((heads[at : at + rows, None] + tails[None]).relu()).squeeze(-1)
            for at in range(0, x.shape[0], rows)
        ]
        return torch.sigmoid(torch.cat(out))


class RelationsRepLayer(nn.Module):
    """gliner's ``relations_rep_layer``: the adjacency of the candidates, ``[E, E]``."""

    def __init__(self, width: int, mode: str) -> None:
        super().__init__()
        layers = {"dot": DotAdjacency, "bilinear": BilinearAdjacency, "mlp": MLPAdjacency}
        self.relation_rep_layer = layers[mode]() if mode == "dot" else layers[mode](width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relation_rep_layer(x)


def candidate_spans(scores: torch.Tensor, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the spans gliner pairs: best label above ``threshold``, inside the
    text, in span order (start, then width). ``scores``: ``[words, max_width, labels]``."""
    words = scores.shape[0]
    if scores.shape[2] == 0 or words == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    best = scores.max(-1).values.numpy()
    starts, widths = np.nonzero(best > threshold)
    inside = starts + widths < words
    starts, widths = starts[inside], widths[inside]
    return starts.astype(np.int64), (starts + widths).astype(np.int64)


def entity_pairs(adjacency: torch.Tensor | None, count: int, threshold: float) -> np.ndarray:
    """``[N, 2]`` ordered pairs (head, tail), head != tail, in row order: those whose
    adjacency is above ``threshold`` (``adjacency`` None: every pair)."""
    grid = np.indices((count, count)).reshape(2, -1).T
    grid = grid[grid[:, 0] != grid[:, 1]]
    if adjacency is None or not len(grid):
        return grid
    values = adjacency.float().cpu().numpy()
    return grid[values[grid[:, 0], grid[:, 1]] > threshold]


@dataclass
class RelexParts:
    """A relex prompt's output taken apart: span scores ``[words, max_width, labels]``, the
    candidates' word spans, the kept pairs (candidate indices) and their relation scores
    ``[pairs, relations]``; ``overflow``: candidates above the threshold when more than
    :data:`MAX_RELATION_ENTITIES` (nothing paired), else 0."""

    scores: torch.Tensor
    starts: np.ndarray
    ends: np.ndarray
    pairs: np.ndarray
    relation_scores: np.ndarray
    overflow: int = 0


def pack(
    scores: torch.Tensor,
    starts: np.ndarray,
    ends: np.ndarray,
    pairs: np.ndarray,
    relation_scores: torch.Tensor | None,
    overflow: int = 0,
) -> torch.Tensor:
    """One flat float32 CPU tensor: scores, [candidates, pairs], starts, ends, heads, tails,
    relation scores (word and candidate indices are exact in float32 below 2**24)."""
    header = [-1.0, float(overflow)] if overflow else [float(len(starts)), float(len(pairs))]
    ints = np.concatenate([starts, ends, pairs[:, 0], pairs[:, 1]]).astype(np.float32)
    parts = [scores.flatten().float().cpu(), torch.tensor(header), torch.from_numpy(ints)]
    if relation_scores is not None:
        parts.append(relation_scores.flatten().float().cpu())
    return torch.cat(parts)


def unpack(
    data: torch.Tensor, num_words: int, max_width: int, num_labels: int, num_relations: int
) -> RelexParts | None:
    """What :func:`pack` made for a prompt of ``num_words`` words, ``num_labels`` entity and
    ``num_relations`` relation labels; None when ``data`` is not such an output (an unscored
    prompt's empty score tensor, or a size that does not add up)."""
    size = num_words * max_width * num_labels
    if data.dim() != 1 or data.numel() < size + HEADER:
        return None
    flat = data.float().cpu()
    scores = flat[:size].view(num_words, max_width, num_labels)
    count, second = (int(v) for v in flat[size : size + HEADER].tolist())
    empty = np.zeros(0, dtype=np.int64)
    if count < 0:
        if data.numel() != size + HEADER:
            return None
        return RelexParts(scores, empty, empty, np.zeros((0, 2), np.int64),
                          np.zeros((0, num_relations), np.float32), overflow=second)  # fmt: skip
    pairs = second
    at = size + HEADER
    if data.numel() != at + 2 * count + 2 * pairs + pairs * num_relations:
        return None
    ints = flat[at : at + 2 * count + 2 * pairs].numpy().astype(np.int64)
    at += 2 * count + 2 * pairs
    relation_scores = flat[at:].numpy().reshape(pairs, num_relations)
    return RelexParts(
        scores,
        ints[:count],
        ints[count : 2 * count],
        np.stack((ints[2 * count : 2 * count + pairs], ints[2 * count + pairs :]), -1),
        relation_scores,
    )


def relex_thresholds(extra: Any) -> tuple[float, float] | None:
    """(entity, adjacency) thresholds the IOProcessor sent with a prompt, or None (none sent:
    a dummy run, or a request that bypassed the IOProcessor)."""
    values = extra.get(RELEX_KEY) if extra else None
    if not isinstance(values, (list, tuple)) or len(values) != 2:
        return None
    try:
        return float(values[0]), float(values[1])
    except (TypeError, ValueError):
        return None


def relations(
    head: Any,
    scores: torch.Tensor,
    words: torch.Tensor,
    relation_vectors: torch.Tensor,
    thresholds: tuple[float, float],
) -> torch.Tensor:
    """The packed output (:func:`pack`) of one relex prompt. ``head``: the span head (its
    ``span_rep_layer``, ``relations_rep_layer``, ``pair_rep_layer``); ``scores``: the prompt's
    sigmoid span scores (CPU); ``words``: its contextual word vectors ``[words, width]``;
    ``relation_vectors``: its ``<<REL>>`` token vectors ``[relations, width]``."""
    threshold, adjacency_threshold = thresholds
    starts, ends = candidate_spans(scores, threshold)
    if len(starts) > MAX_RELATION_ENTITIES:
        empty = np.zeros(0, dtype=np.int64)
        return pack(scores, empty, empty, np.zeros((0, 2), np.int64), None, len(starts))
    if not len(starts):
        return pack(scores, starts, ends, np.zeros((0, 2), np.int64), None)
    marker = head.span_rep_layer.span_rep_layer
    device = words.device
    first = torch.from_numpy(starts).to(device)
    last = torch.from_numpy(ends).to(device)
    joined = torch.cat((marker.project_start(words[first]), marker.project_end(words[last])), -1)
    spans = marker.out_project(joined.relu())  # [candidates, width]
    layer = getattr(head, "relations_rep_layer", None)
    adjacency = None if layer is None else layer(spans)
    pairs = entity_pairs(adjacency, len(starts), adjacency_threshold)
    if not len(pairs) or relation_vectors.shape[0] == 0:
        return pack(scores, starts, ends, pairs, None)
    index = torch.from_numpy(pairs).to(device)
    out = []
    for at in range(0, len(pairs), PAIR_CHUNK):
        chunk = index[at : at + PAIR_CHUNK]
        pair = head.pair_rep_layer(torch.cat((spans[chunk[:, 0]], spans[chunk[:, 1]]), -1))
        out.append(torch.sigmoid((pair @ relation_vectors.T).float()))
    return pack(scores, starts, ends, pairs, torch.cat(out))


def relation_positions(token_ids: torch.Tensor, rel_index: int, embed_token: bool) -> np.ndarray:
    """Token positions of the relation label vectors (``<<REL>>`` tokens, or the token after
    each when the checkpoint does not embed the marker)."""
    positions = np.flatnonzero(token_ids.cpu().numpy() == rel_index)
    return positions if embed_token else positions + 1


def decode_relations(
    parts: RelexParts,
    kept: Sequence[Any],
    relation_labels: Sequence[str],
    threshold: float,
) -> list[tuple[int, str, int, float]]:
    """(head entity, relation, tail entity, score) as gliner's decoder keeps them: each kept
    pair (in pair order) and relation label (in label order) scoring above ``threshold``,
    where both candidates are decoded entities (``kept``: their word spans, in entity order;
    a candidate maps to the first entity of its span)."""
    first_of: dict[tuple[int, int], int] = {}
    for i, span in enumerate(kept):
        first_of.setdefault((span.start, span.end), i)
    entity = [first_of.get((s, e)) for s, e in zip(parts.starts.tolist(), parts.ends.tolist())]
    out = []
    above = parts.relation_scores > threshold
    for j, (h, t) in enumerate(parts.pairs.tolist()):
        head, tail = entity[h], entity[t]
        if head is None or tail is None:
            continue
        for c in np.flatnonzero(above[j]).tolist():
            out.append((head, relation_labels[c], tail, float(parts.relation_scores[j, c])))
    return out
