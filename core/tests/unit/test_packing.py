"""PackedLayout: sequence boundaries of vLLM's packed batch from its positions."""

import torch
from vllm_factory.core.packing import PackedLayout, Run


def positions_of(lengths: list[int]) -> torch.Tensor:
    return torch.cat([torch.arange(n) for n in lengths]) if lengths else torch.zeros(0)


def test_boundaries_on_device_and_host() -> None:
    layout = PackedLayout(positions_of([3, 1, 4]))
    assert layout.num_seqs == 3 and layout.total == 8
    assert layout.starts.tolist() == [0, 3, 4] and layout.lengths.tolist() == [3, 1, 4]
    assert layout.cu_seqlens.tolist() == [0, 3, 4, 8] and layout.cu_seqlens.dtype == torch.int32
    assert layout.seq_of_token.tolist() == [0, 0, 0, 1, 2, 2, 2, 2]
    assert (layout.host_starts, layout.host_lengths, layout.max_seqlen) == ([0, 3, 4], [3, 1, 4], 4)


def test_runs_group_adjacent_equal_lengths_only() -> None:
    layout = PackedLayout(positions_of([2, 2, 5, 2, 2, 2]))
    assert layout.runs == [Run(0, 2, 2), Run(4, 1, 5), Run(9, 3, 2)]
    assert [run.end for run in layout.runs] == [4, 9, 15]


def test_empty_batch() -> None:
    layout = PackedLayout(torch.zeros(0, dtype=torch.long))
    assert layout.num_seqs == 0 and layout.max_seqlen == 0 and layout.runs == []
    assert layout.cu_seqlens.tolist() == [0]
