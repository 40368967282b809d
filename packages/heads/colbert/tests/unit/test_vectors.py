"""The response encodings of token vectors (``vectors``: no vLLM needed)."""

import base64

import numpy as np
import pytest
import torch
from vllm_factory.heads.colbert.vectors import as_float32, decode_vectors, encode_vectors


def test_base64_is_the_exact_little_endian_float32_matrix():
    vectors = torch.randn(7, 48, generator=torch.Generator().manual_seed(0))
    item = encode_vectors(as_float32(vectors)[1:], "base64")
    assert (item["num_tokens"], item["dim"]) == (6, 48)
    decoded = np.frombuffer(base64.b64decode(item["embeddings"]), dtype="<f4")
    np.testing.assert_array_equal(decoded.reshape(6, 48), vectors[1:].numpy())


def test_float_keeps_nested_lists_without_dim():
    vectors = torch.tensor([[0.5, -0.25], [1.0, 0.0]])
    item = encode_vectors(as_float32(vectors), "float")
    assert item == {"embeddings": [[0.5, -0.25], [1.0, 0.0]], "num_tokens": 2}
    # The same Python floats torch gives (the JSON answer is unchanged by the NumPy path).
    odd = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    assert encode_vectors(as_float32(odd), "float")["embeddings"] == (odd.tolist())


def test_as_float32_views_float32_and_converts_the_rest():
    vectors = torch.randn(4, 8)
    view = as_float32(vectors)
    assert view.dtype == np.float32 and np.shares_memory(view, vectors.numpy())
    half = as_float32(vectors.to(torch.bfloat16))
    assert half.dtype == np.float32
    np.testing.assert_array_equal(half, vectors.to(torch.bfloat16).float().numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_base64_is_the_rounded_matrix_in_half_the_bytes(dtype):
    vectors = torch.randn(5, 32, generator=torch.Generator().manual_seed(2))
    full = encode_vectors(as_float32(vectors), "base64")
    half = encode_vectors(as_float32(vectors), "base64", dtype)
    assert half["dtype"] == dtype and "dtype" not in full
    assert len(base64.b64decode(half["embeddings"])) == 2 * 5 * 32
    rounded = vectors.to(getattr(torch, dtype)).float().numpy()
    np.testing.assert_array_equal(decode_vectors(half), rounded)  # exactly torch's rounding
    np.testing.assert_array_equal(decode_vectors(full), vectors.numpy())


def test_half_precision_bytes_are_little_endian():
    vectors = np.array([[1.0, -2.0]], dtype=np.float32)
    f16 = base64.b64decode(encode_vectors(vectors, "base64", "float16")["embeddings"])
    assert f16 == np.array([1.0, -2.0], dtype="<f2").tobytes() == b"\x00\x3c\x00\xc0"
    bf16 = base64.b64decode(encode_vectors(vectors, "base64", "bfloat16")["embeddings"])
    assert bf16 == b"\x80\x3f\x00\xc0"  # the top halves of float32 1.0 and -2.0


def test_decode_reads_every_answer_form():
    """One text with float vectors (``data`` is the vectors), one text's item (float or
    base64), and a list of items: the same matrices."""
    from vllm_factory.heads.colbert.vectors import decode_response

    a = np.arange(6, dtype=np.float32).reshape(3, 2) / 7
    b = np.ones((1, 2), dtype=np.float32)
    as_float = [encode_vectors(m, "float") for m in (a, b)]
    as_base64 = [encode_vectors(m, "base64") for m in (a, b)]
    np.testing.assert_array_equal(decode_vectors(a.tolist()), a)
    for data in (a.tolist(), as_float[0], as_base64[0]):
        (only,) = decode_response(data)
        np.testing.assert_array_equal(only, a)
    for items in (as_float, as_base64):
        got = decode_response(items)
        assert len(got) == 2
        np.testing.assert_array_equal(got[0], a)
        np.testing.assert_array_equal(got[1], b)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "binary", "ubinary"])
def test_compact_vectors_round_trip_in_json_and_base64(dtype):
    from vllm_factory.core.quantize import quantize_all
    from vllm_factory.heads.colbert.vectors import compact_vectors

    rng = np.random.default_rng(0)
    matrices = [rng.standard_normal((n, 16)).astype(np.float32) for n in (3, 5)]
    compact = compact_vectors(matrices, dtype, None)
    want = quantize_all(matrices, dtype)
    for got, expected in zip(compact, want):
        np.testing.assert_array_equal(got, expected)
        for fmt in ("float", "base64"):
            item = encode_vectors(got, fmt, dtype)
            assert item["dtype"] == dtype
            back = decode_vectors(item)
            assert back.dtype == expected.dtype
            np.testing.assert_array_equal(back, expected)
