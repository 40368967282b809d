import pytest
import torch
from vllm_factory.heads.colbert.scoring import maxsim_scores, top_k


def test_maxsim_is_the_sum_of_best_matches_per_query_token():
    torch.manual_seed(0)
    query = torch.nn.functional.normalize(torch.randn(5, 8), dim=-1)
    documents = [torch.nn.functional.normalize(torch.randn(n, 8), dim=-1) for n in (3, 1, 7)]
    expected = [float((query @ d.T).max(dim=1).values.sum()) for d in documents]
    assert maxsim_scores(query, documents) == pytest.approx(expected, abs=1e-6)


def test_negative_similarities_are_not_clamped_and_no_padding_leaks():
    query = torch.tensor([[1.0, 0.0]])
    documents = [torch.tensor([[-1.0, 0.0], [-0.5, 0.0]]), torch.tensor([[0.0, 1.0]])]
    assert maxsim_scores(query, documents) == pytest.approx([-0.5, 0.0])
    assert maxsim_scores(query, [torch.zeros(0, 2)]) == [0.0]
    assert maxsim_scores(query, []) == []


def test_top_k_best_first_ties_in_input_order():
    assert top_k([0.1, 0.5, 0.5, 0.2], 3) == [
        {"index": 1, "score": 0.5}, {"index": 2, "score": 0.5}, {"index": 3, "score": 0.2},
    ]  # fmt: skip
    assert len(top_k([0.1], 5)) == 1


def test_scores_as_each_dtype():
    import numpy as np
    from vllm_factory.core.quantize import dequantize, quantize, ranges_of
    from vllm_factory.heads.colbert.scoring import scores_as

    rng = np.random.default_rng(0)
    query = rng.standard_normal((4, 16)).astype(np.float32)
    documents = [rng.standard_normal((n, 16)).astype(np.float32) for n in (3, 6)]
    floats = scores_as("float32", query, documents)
    assert floats == maxsim_scores(
        torch.from_numpy(query), [torch.from_numpy(d) for d in documents]
    )
    for dtype in ("binary", "ubinary"):
        want = [
            float(((query[:, None] > 0) == (d[None] > 0)).sum(-1).max(axis=1).sum())
            for d in documents
        ]
        assert scores_as(dtype, query, documents) == want
    ranges = ranges_of(np.concatenate(documents))
    for dtype in ("int8", "uint8"):
        read_back = [dequantize(quantize(d, dtype, ranges), dtype, ranges) for d in documents]
        want = maxsim_scores(torch.from_numpy(query), [torch.from_numpy(d) for d in read_back])
        assert scores_as(dtype, query, documents) == pytest.approx(want)
        given = ranges.tolist()
        assert scores_as(dtype, query, documents, given) == pytest.approx(want)
