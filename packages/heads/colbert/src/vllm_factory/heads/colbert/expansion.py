"""Which tokens are query-expansion tokens, computed on vLLM's packed token batch.

PyLate appends the expansion (mask) token after ``[SEP]`` to pad a query to its length and,
unless ``attend_to_expansion_tokens`` is set, gives those tokens attention_mask 0: they
still produce vectors but no token may attend to them. They are exactly the trailing run
of expansion tokens of a sequence (a document, or a query that filled its length, ends
with ``[SEP]``).
"""

from __future__ import annotations

import torch
from vllm_factory.core.packing import PackedLayout


def trailing_expansion_tokens(
    input_ids: torch.Tensor, positions: torch.Tensor, expansion_id: int
) -> torch.Tensor:
    """``[T]`` bool: token is part of the trailing run of ``expansion_id`` of its sequence.

    Sequences are delimited by ``positions == 0`` (whole prompts, no chunked prefill).
    """
    is_expansion = input_ids == expansion_id
    others = (~is_expansion).long()
    # others_after[t] = non-expansion tokens from t to the end of the whole batch.
    others_after = others.flip(0).cumsum(0).flip(0)
    layout = PackedLayout(positions)
    # Value of others_after at the next sequence's start (0 past the last sequence).
    next_start = torch.cat([others_after[layout.starts[1:]], others_after.new_zeros(1)])
    remaining_in_sequence = others_after - next_start[layout.seq_of_token]
    return is_expansion & (remaining_in_sequence == 0)


def hidden_expansion_keys(
    input_ids: torch.Tensor, positions: torch.Tensor, expansion_id: int
) -> torch.Tensor | None:
    """The keys a batch must hide (:func:`trailing_expansion_tokens`), or None when it hides
    none, so that the encoder can take its plain path; one host sync when no token is an
    expansion token, two when some are. A token at position 0 is never hidden: a real prompt
    starts with its prefix token, and the one-token sequences vLLM pads a CUDA-graph batch
    with (positions 0, stale ids) must not send a batch of documents to the masked path."""
    candidates = (input_ids == expansion_id) & (positions > 0)
    if not bool(candidates.any()):
        return None
    hidden = trailing_expansion_tokens(input_ids, positions, expansion_id) & candidates
    return hidden if bool(hidden.any()) else None


def expansion_token_id(tokenizer) -> int:
    """The token PyLate pads queries with: mask, else EOS, else PAD."""
    for token_id in (tokenizer.mask_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id):
        if token_id is not None:
            return token_id
    raise ValueError("the tokenizer has no mask, EOS or pad token for query expansion")
