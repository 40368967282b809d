"""Token vectors as a response carries them; NumPy and torch only, no vLLM.

``"float"``: nested JSON lists. ``"base64"``: the ``[num_tokens, dim]`` matrix as little-endian
float32 bytes, row-major, base64-encoded (``dim`` added): ~4x smaller and far cheaper to encode
and parse than a JSON list of 65k floats per 512-token document. Encoded with ``pybase64``
(what vLLM uses for its own base64 embeddings): 0.07 ms per 512 x 128 matrix on the 2-core CPU
against 0.44 ms with the standard library's ``base64``, paid per document in the API process.
"""

from __future__ import annotations

import numpy as np
import pybase64
import torch

ENCODING_FORMATS = ("float", "base64")


def encode_vectors(vectors: np.ndarray, encoding_format: str) -> dict:
    """One item of a response: ``embeddings`` in ``encoding_format`` and ``num_tokens``."""
    if encoding_format == "base64":
        raw = np.ascontiguousarray(vectors, dtype="<f4").tobytes()
        return {
            "embeddings": pybase64.b64encode(raw).decode("ascii"),
            "num_tokens": len(vectors),
            "dim": vectors.shape[1],
        }
    return {"embeddings": vectors.tolist(), "num_tokens": len(vectors)}


def as_float32(tensor: torch.Tensor) -> np.ndarray:
    """A pooler output as a float32 NumPy array: a view when it already is one on the CPU (vLLM
    pools in float32 unless ``head_dtype`` says otherwise)."""
    if tensor.dtype != torch.float32 or tensor.device.type != "cpu":
        tensor = tensor.to("cpu", torch.float32)
    return tensor.numpy()
