"""Late-interaction (MaxSim) scores computed inside the server; pure torch, no vLLM import.

A document's score for a query is the sum, over the query's token vectors, of the best dot
product with any of the document's kept token vectors: PyLate's ``colbert_scores`` for one
query and one document. (PyLate's batched ``rerank`` pads shorter documents with zero vectors
and no mask, so there a document whose real similarities are all negative scores 0 for that
query token; these scores never depend on what else is in the batch.)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def maxsim_scores(query: torch.Tensor, documents: Sequence[torch.Tensor]) -> list[float]:
    """``query`` ``[q, dim]`` against each ``[t_i, dim]`` document; one float per document."""
    if not documents:
        return []
    lengths = torch.tensor([len(d) for d in documents])
    similarities = query.float() @ torch.cat([d.float() for d in documents]).T  # [q, sum t_i]
    # Best match per (document, query token): a segmented max over each document's columns.
    best = torch.segment_reduce(similarities.T, "max", lengths=lengths, axis=0)  # [docs, q]
    best = best.masked_fill((lengths == 0).unsqueeze(1), 0.0)  # a document with no kept token
    return best.sum(dim=1).tolist()


def top_k(scores: Sequence[float], k: int) -> list[dict[str, float | int]]:
    """The ``k`` best documents as ``{"index", "score"}``, best first (ties: input order)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [{"index": i, "score": scores[i]} for i in order[:k]]
