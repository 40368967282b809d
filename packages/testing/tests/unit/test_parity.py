import numpy as np
from vllm_factory.testing.parity import compare_token_vectors, cosine_rows


def test_cosine_rows():
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    b = np.array([[2.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(cosine_rows(a, b), [1.0, 0.0])


def test_compare_reports_count_mismatch_and_worst_cosine():
    ref = [np.eye(3), np.ones((2, 3))]
    served = [np.eye(3), np.ones((1, 3))]
    result = compare_token_vectors(served, ref)
    assert result.count_mismatches == [1]
    assert result.min_cosine == 1.0
    noisy = [np.eye(3) + 0.1, np.ones((2, 3))]
    assert compare_token_vectors(noisy, ref).min_cosine < 0.999
