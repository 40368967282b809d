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
        {"text": "a", "encoding_format": "base64", "embed_dtype": "int4"},
        {"text": "a", "encoding_format": "base64", "embed_dtype": "fp8_e4m3"},
    ],
)
def test_rejected(data):
    with pytest.raises(ValidationError):
        ColBERTRequest.model_validate(data)


def test_encoding_format_defaults_to_float():
    assert ColBERTRequest.model_validate({"text": "a"}).encoding_format == "float"
    request = ColBERTRequest.model_validate({"text": "a", "encoding_format": "base64"})
    assert request.encoding_format == "base64"


def test_embed_dtype_defaults_to_float32_and_takes_half_precision_with_base64():
    assert ColBERTRequest.model_validate({"text": "a"}).embed_dtype == "float32"
    for dtype in ("float16", "bfloat16"):
        data = {"text": "a", "encoding_format": "base64", "embed_dtype": dtype}
        request = ColBERTRequest.model_validate(data)
        assert request.embed_dtype == dtype and request.problem() is None


def test_compact_dtypes_take_json_or_base64_and_scoring():
    for dtype in ("int8", "uint8", "binary", "ubinary"):
        for fmt in ("float", "base64"):
            request = ColBERTRequest.model_validate(
                {"text": "a", "encoding_format": fmt, "embed_dtype": dtype}
            )
            assert request.problem() is None
        scoring = {"query": "q", "documents": ["a"], "embed_dtype": dtype}
        assert ColBERTRequest.model_validate(scoring).problem() is None
    ranges = {"embed_dtype": "int8", "calibration": [[-1, -0.5], [1, 0.5]]}
    assert ColBERTRequest.model_validate({"text": "a", **ranges}).problem() is None


def test_scoring_form():
    request = ColBERTRequest.model_validate({"query": "q", "documents": ["a", "b"], "top_k": 1})
    assert request.problem() is None and request.is_scoring
    assert request.texts == ["q", "a", "b"]


@pytest.mark.parametrize(
    "data, field",
    [
        ({"query": "q"}, "data.documents"),
        ({"documents": ["a"]}, "data.query"),
        ({"top_k": 2}, "data.query"),
        ({"query": "q", "documents": ["a"], "text": "x"}, "data.text"),
        ({"query": "q", "documents": ["a"], "is_query": True}, "data.is_query"),
        ({}, "data.text"),
        ({"text": "a", "embed_dtype": "float16"}, "data.embed_dtype"),
        ({"query": "q", "documents": ["a"], "embed_dtype": "float16"}, "data.embed_dtype"),
        ({"text": "a", "embed_dtype": "binary", "calibration": [[0.0], [1.0]]}, "data.calibration"),
        (
            {"text": "a", "embed_dtype": "int8", "calibration": [[0.0], [1.0, 2.0]]},
            "data.calibration",
        ),
        ({"text": "a", "embed_dtype": "int8", "calibration": [[0.0]]}, "data.calibration"),
        ({"text": "a", "embed_dtype": "uint8", "calibration": [[2.0], [1.0]]}, "data.calibration"),
        (
            {"text": "a", "embed_dtype": "int8", "calibration": [[0.0], [float("inf")]]},
            "data.calibration",
        ),
        (
            {"query": "q", "documents": ["a"], "embed_dtype": "int8", "calibration": [[0.0], []]},
            "data.calibration",
        ),
    ],
)
def test_forms_that_do_not_fit_name_the_field(data, field):
    problem = ColBERTRequest.model_validate(data).problem()
    assert problem is not None and problem[0] == field and problem[1].startswith(field)


@pytest.mark.parametrize(
    "data",
    [
        {"query": "", "documents": ["a"]},
        {"query": "q", "documents": []},
        {"query": "q", "documents": ["a", " "]},
        {"query": "q", "documents": ["a"] * 10_000},
        {"query": "q", "documents": ["a"], "top_k": 0},
        {"query": "q", "documents": "a"},
    ],
)
def test_scoring_rejected(data):
    with pytest.raises(ValidationError):
        ColBERTRequest.model_validate(data)


@pytest.mark.parametrize(
    ("data", "bare"),
    [
        ({"text": "a"}, True),  # one text, float vectors: the vectors themselves
        ({"text": "a", "is_query": True}, True),
        ({"text": ["a"]}, False),  # a list: one item per text
        ({"text": "a", "encoding_format": "base64"}, False),  # base64 needs its item's shape
        ({"query": "q", "documents": ["d"]}, False),
    ],
)
def test_bare_vectors_for_one_text_in_floats(data, bare):
    assert ColBERTRequest.model_validate(data).bare_vectors is bare
