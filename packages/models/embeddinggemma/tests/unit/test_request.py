"""The request model's own checks (prompt names and dimensions are checked by the IOProcessor)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from vllm_factory.models.embeddinggemma.request import EmbeddingGemmaRequest


def test_valid_requests():
    one = EmbeddingGemmaRequest.model_validate({"text": " keeps spaces "})
    assert one.texts == [" keeps spaces "] and one.prompt_name is None and one.dimensions is None
    many = EmbeddingGemmaRequest.model_validate(
        {"text": ["a", "b"], "prompt_name": "query", "dimensions": 256}
    )
    assert many.texts == ["a", "b"] and many.dimensions == 256


@pytest.mark.parametrize(
    "data",
    [
        {"text": ""},
        {"text": []},
        {"text": ["a", " "]},
        {"text": 1},
        {"text": "a", "dimensions": "256"},
        {"text": "a", "dimensions": True},
        {"text": "a", "dimensions": 256.0},
        {"text": "a", "prompt_name": 1},
        {"text": "a", "other": 1},
    ],
)
def test_invalid_requests(data):
    with pytest.raises(ValidationError):
        EmbeddingGemmaRequest.model_validate(data)


def test_embed_dtype_and_calibration():
    for dtype in ("float32", "int8", "uint8", "binary", "ubinary"):
        assert (
            EmbeddingGemmaRequest.model_validate({"text": "a", "embed_dtype": dtype}).problem()
            is None
        )
    with pytest.raises(ValidationError):
        EmbeddingGemmaRequest.model_validate({"text": "a", "embed_dtype": "float16"})
    ok = {"text": "a", "embed_dtype": "uint8", "calibration": [[0, -1.0], [1, 1.0]]}
    assert EmbeddingGemmaRequest.model_validate(ok).problem() is None
    for calibration, dtype in (
        ([[0.0], [1.0]], "binary"),
        ([[0.0], [1.0, 2.0]], "int8"),
        ([[1.0], [0.0]], "int8"),
        ([[float("nan")], [0.0]], "int8"),
    ):
        data = {"text": "a", "embed_dtype": dtype, "calibration": calibration}
        field, message = EmbeddingGemmaRequest.model_validate(data).problem()
        assert field == "data.calibration" and message.startswith(field)
