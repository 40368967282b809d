"""The IOProcessor's response encodings (the IOProcessor class subclasses vLLM's, so this needs
vLLM: `nox -s tests` runs it, tox does not)."""

import base64

import numpy as np
import torch
from vllm_factory.heads.colbert.io_processor import ColBERTIOProcessor


def test_base64_is_the_exact_little_endian_float32_matrix():
    vectors = torch.randn(7, 48, generator=torch.Generator().manual_seed(0))
    item = ColBERTIOProcessor._encode_vectors(vectors, "base64")
    assert (item["num_tokens"], item["dim"]) == (7, 48)
    decoded = np.frombuffer(base64.b64decode(item["embeddings"]), dtype="<f4")
    np.testing.assert_array_equal(decoded.reshape(7, 48), vectors.numpy())


def test_float_keeps_nested_lists_without_dim():
    vectors = torch.tensor([[0.5, -0.25], [1.0, 0.0]])
    item = ColBERTIOProcessor._encode_vectors(vectors, "float")
    assert item == {"embeddings": [[0.5, -0.25], [1.0, 0.0]], "num_tokens": 2}
