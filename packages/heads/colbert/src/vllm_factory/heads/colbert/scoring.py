"""Late-interaction (MaxSim) scores computed inside the server; pure torch, no vLLM import.

A document's score for a query is the sum, over the query's token vectors, of the best dot
product with any of the document's kept token vectors: PyLate's ``colbert_scores`` for one
query and one document. (PyLate's batched ``rerank`` pads shorter documents with zero vectors
and no mask, so there a document whose real similarities are all negative scores 0 for that
query token; these scores never depend on what else is in the batch.)

With a compact ``embed_dtype`` (:func:`scores_as`), the vectors scored are those an index of
that dtype holds: binary / ubinary, query and documents both as sign bits, MaxSim on Hamming
similarity (per token pair, ``dim`` minus the Hamming distance: the dimensions whose signs
agree); int8 / uint8, the float query against the documents' buckets read back as floats
(each bucket's lower edge, ``min + bucket * step``), as sentence-transformers rescores scalar
quantized candidates; the documents calibrated on ``calibration``, else on every document
vector of the request together.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from vllm_factory.core.quantize import (
    BINARY_DTYPES,
    SCALAR_DTYPES,
    binary_maxsim_scores,
    dequantize,
    quantize,
    ranges_of,
)


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


def scores_as(
    embed_dtype: str,
    query: np.ndarray,
    documents: Sequence[np.ndarray],
    calibration: list[list[float]] | None = None,
) -> list[float]:
    """MaxSim of float ``query`` ``[q, dim]`` against each float ``[t_i, dim]`` document on the
    vectors of ``embed_dtype`` (see the module); raises
    :class:`vllm_factory.core.quantize.CalibrationError` where int8 / uint8 cannot apply."""
    if embed_dtype in BINARY_DTYPES:
        packed = [quantize(d, embed_dtype) for d in documents]
        return binary_maxsim_scores(
            quantize(query, embed_dtype), packed, query.shape[1], embed_dtype
        )
    if embed_dtype in SCALAR_DTYPES:
        if calibration is not None:
            ranges = np.asarray(calibration, dtype=np.float32)
        else:
            ranges = ranges_of(np.concatenate(list(documents), axis=0))
        documents = [
            dequantize(quantize(d, embed_dtype, ranges), embed_dtype, ranges) for d in documents
        ]
    return maxsim_scores(torch.from_numpy(query), [torch.from_numpy(d) for d in documents])


def top_k(scores: Sequence[float], k: int) -> list[dict[str, float | int]]:
    """The ``k`` best documents as ``{"index", "score"}``, best first (ties: input order)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [{"index": i, "score": scores[i]} for i in order[:k]]
