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
