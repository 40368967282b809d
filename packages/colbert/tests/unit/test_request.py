import pytest
from pydantic import ValidationError
from vllm_factory.heads.colbert.request import ColBERTRequest


def test_single_text_and_list():
    assert ColBERTRequest.model_validate({"text": "a"}).texts == ["a"]
    request = ColBERTRequest.model_validate({"text": ["a", "b"], "is_query": True})
    assert request.texts == ["a", "b"] and request.is_query


@pytest.mark.parametrize(
    "data",
    [
        {"text": ""},
        {"text": " \n"},
        {"text": []},
        {"text": 1},
        {"text": "a", "is_query": "true"},
        {"text": "a", "extra": 1},
        {"text": ["a"] * 1025},
        {"text": "a", "encoding_format": "bytes"},
        {"text": "a", "encoding_format": None},
    ],
)
def test_rejected(data):
    with pytest.raises(ValidationError):
        ColBERTRequest.model_validate(data)


def test_encoding_format_defaults_to_float():
    assert ColBERTRequest.model_validate({"text": "a"}).encoding_format == "float"
    request = ColBERTRequest.model_validate({"text": "a", "encoding_format": "base64"})
    assert request.encoding_format == "base64"
