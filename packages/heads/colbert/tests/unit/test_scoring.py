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
