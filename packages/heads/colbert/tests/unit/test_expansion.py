import torch
from vllm_factory.heads.colbert.expansion import hidden_expansion_keys, trailing_expansion_tokens

MASK = 9


def packed(*sequences: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.tensor([t for seq in sequences for t in seq])
    positions = torch.cat([torch.arange(len(seq)) for seq in sequences])
    return ids, positions


def test_only_the_trailing_run_of_each_sequence_is_hidden():
    query = [1, 5, MASK, 6, 2, MASK, MASK]  # a literal mask inside the text stays visible
    document = [1, 7, 8, 2]
    full_query = [1, 5, 6, 2]
    ids, positions = packed(query, document, full_query, [1, 2, MASK])
    hidden = trailing_expansion_tokens(ids, positions, MASK).tolist()
    assert hidden == (
        [False, False, False, False, False, True, True]
        + [False] * 4
        + [False] * 4
        + [False, False, True]
    )


def test_no_expansion_tokens():
    ids, positions = packed([1, 2, 3], [4, 5])
    assert not trailing_expansion_tokens(ids, positions, MASK).any()


def test_batches_that_hide_nothing_take_the_plain_path():
    """None sends the batch to the encoder's plain (compilable) path. The one-token sequences
    vLLM pads a CUDA-graph batch with (position 0, stale ids that may be the mask token) hide
    nothing, so they never send documents to the masked path."""
    ids, positions = packed([1, 7, 8, 2], [1, 5, 6, 2])
    assert hidden_expansion_keys(ids, positions, MASK) is None
    padding = [[MASK], [MASK], [3]]
    ids, positions = packed([1, 7, 8, 2], *padding)
    assert hidden_expansion_keys(ids, positions, MASK) is None
    ids, positions = packed([1, 5, 2, MASK, MASK], [1, 7, 2], *padding)
    hidden = hidden_expansion_keys(ids, positions, MASK)
    assert hidden is not None
    assert hidden.tolist() == [False, False, False, True, True] + [False] * 3 + [False] * 3
