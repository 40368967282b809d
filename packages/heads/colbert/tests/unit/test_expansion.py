import torch
from vllm_factory.heads.colbert.expansion import trailing_expansion_tokens

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
