"""The ColPali request forms and the field each refusal names."""

import pytest
from pydantic import ValidationError
from vllm_factory.heads.colpali.request import MAX_IMAGES_PER_REQUEST, ColPaliRequest


def parse(data: dict) -> ColPaliRequest:
    return ColPaliRequest.model_validate(data)


def test_text_and_image_forms():
    texts = parse({"text": ["a", "b"], "is_query": True})
    assert texts.problem() is None and texts.texts == ["a", "b"] and texts.image_sources == []
    image = parse({"image": "aGVsbG8="})
    assert image.problem() is None and image.image_sources == ["aGVsbG8="] and image.texts == []
    assert not image.is_scoring


def test_scoring_form_orders_images_then_documents():
    request = parse({"query": "q", "images": ["x", "y"], "documents": ["d"], "top_k": 2})
    assert request.problem() is None and request.is_scoring
    assert request.image_sources == ["x", "y"] and request.texts == ["d"]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"text": "a", "image": "x"}, "data.image"),
        ({}, "data.text"),
        ({"is_query": True}, "data.text"),
        ({"image": "x", "is_query": True}, "data.is_query"),
        ({"query": "q"}, "data.images"),
        ({"images": ["x"]}, "data.query"),
        ({"query": "q", "images": ["x"], "text": "t"}, "data.text"),
        ({"image": "x", "embed_dtype": "float16"}, "data.embed_dtype"),
        ({"query": "q", "images": ["x"], "embed_dtype": "bfloat16"}, "data.embed_dtype"),
    ],
)
def test_mixed_or_missing_fields_name_the_field(data, field):
    assert parse(data).problem()[0] == field


@pytest.mark.parametrize(
    "data",
    [
        {"image": []},
        {"image": ""},
        {"image": ["x"] * (MAX_IMAGES_PER_REQUEST + 1)},
        {"image": 3},
        {"text": " "},
        {"query": "q", "images": ["x"], "top_k": 0},
        {"text": "a", "encoding_format": "int8"},
        {"text": "a", "encoding_format": "base64", "embed_dtype": "int4"},
        {"text": "a", "unknown": 1},
    ],
)
def test_bad_values_are_refused(data):
    with pytest.raises(ValidationError):
        parse(data)


@pytest.mark.parametrize(
    ("data", "bare"),
    [
        ({"text": "a"}, True),  # one input, float vectors: the vectors themselves
        ({"image": "aGVsbG8="}, True),
        ({"text": ["a"]}, False),  # a list: one item per input
        ({"image": ["aGVsbG8="]}, False),
        ({"image": "aGVsbG8=", "encoding_format": "base64"}, False),
        ({"query": "q", "images": ["aGVsbG8="]}, False),
    ],
)
def test_bare_vectors_for_one_input_in_floats(data, bare):
    assert parse(data).bare_vectors is bare


def test_an_image_as_a_document_is_accepted_as_vllm_factory_0_2_sends_it():
    """``{"image": ..., "is_query": false}`` (0.2's README): images are documents."""
    request = parse({"image": "aGVsbG8=", "is_query": False})
    assert request.problem() is None and request.image_sources == ["aGVsbG8="]


def test_compact_embed_dtype_in_both_forms():
    for dtype in ("int8", "uint8", "binary", "ubinary"):
        for data in (
            {"image": "x", "embed_dtype": dtype},
            {"query": "q", "images": ["x"], "embed_dtype": dtype},
        ):
            assert ColPaliRequest.model_validate(data).problem() is None
    bad = {"image": "x", "embed_dtype": "ubinary", "calibration": [[0.0], [1.0]]}
    assert ColPaliRequest.model_validate(bad).problem()[0] == "data.calibration"
    bad = {"query": "q", "images": ["x"], "embed_dtype": "int8", "calibration": [[1.0], [0.0]]}
    assert ColPaliRequest.model_validate(bad).problem()[0] == "data.calibration"
