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


def test_a_quantizing_session_is_held_to_the_quantized_bounds(monkeypatch):
    """``--quantization`` among the session's server args (the GPU check's ``--server-arg``):
    ColBERT vectors at the fixed cosine floor, scores and changed decisions within twice the
    library's own bf16 error; without it, bf16's bounds as before."""
    from vllm_factory.testing import parity
    from vllm_factory.testing.server import ARGS_ENV, session_quantization

    library = parity.LibraryError(min_cosine=0.9999, max_abs_diff=0.1)
    monkeypatch.setenv(ARGS_ENV, "--gpu-memory-utilization=0.05")
    assert session_quantization() is None
    assert parity.library_factor() == parity.BF16_FACTOR
    bf16 = parity.tolerance("bfloat16", library)
    assert bf16.min_cosine == 0.999 and bf16.score == parity.BF16_FACTOR * 0.1
    for args in ("--quantization=fp8", "--quantization fp8", "-q fp8"):
        monkeypatch.setenv(ARGS_ENV, f"--enforce-eager {args}")
        assert session_quantization() == "fp8"
        assert parity.library_factor() == parity.QUANTIZED_FACTOR
        quantized = parity.tolerance("bfloat16", library)
        assert quantized.min_cosine == parity.QUANTIZED.min_cosine == 0.995
        assert quantized.score == parity.QUANTIZED_FACTOR * 0.1
        assert parity.tolerance("bfloat16", library, quantization="") == bf16  # told: not quantized
        # A library whose own bf16 run is farther off than the floor widens it (x 2).
        rough = parity.tolerance("bfloat16", parity.LibraryError(min_cosine=0.996))
        assert abs(rough.min_cosine - (1 - parity.QUANTIZED_FACTOR * 0.004)) < 1e-12
        # fp32 servers (LoRA and other fp32-only suites) keep fp32's bounds.
        assert parity.tolerance("float32") == parity.TOLERANCES["float32"]
