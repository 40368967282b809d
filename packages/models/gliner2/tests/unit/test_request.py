"""The GLiNER2 request fields beside the schema (no vLLM)."""

import pytest
from pydantic import ValidationError
from vllm_factory.core.request import describe_validation_error
from vllm_factory.models.gliner2.request import GLiNER2Request


def test_runtime_classic_is_accepted_as_vllm_factory_0_2_clients_send_it():
    request = GLiNER2Request.model_validate(
        {"text": "x", "entities": ["company"], "runtime": "classic"}
    )
    assert request.runtime == "classic" and request.plan() is not None


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"runtime": "fast"}, "data.runtime"),
        ({"runtime": None}, "data.runtime"),
        ({"runtme": "classic"}, "data.runtme"),  # a misspelt field is still refused
    ],
)
def test_other_runtimes_and_unknown_fields_name_the_field(data, field):
    with pytest.raises(ValidationError) as info:
        GLiNER2Request.model_validate({"text": "x", "entities": ["company"], **data})
    path, message = describe_validation_error(info.value)
    assert path == field and message.startswith(field)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"long_text": "all"}, "data.long_text"),
        ({"chunk_size": 0}, "data.chunk_size"),
        ({"chunk_size": 100_001}, "data.chunk_size"),
        ({"chunk_size": 8, "chunk_overlap": 8}, "data.chunk_overlap"),
        ({"chunk_overlap": -1}, "data.chunk_overlap"),
        ({"return_windows": 1}, "data.return_windows"),
    ],
)
def test_long_text_settings_are_bounded_naming_the_field(data, field):
    with pytest.raises(ValidationError) as info:
        GLiNER2Request.model_validate({"text": "x", "entities": ["company"], **data})
    path, message = describe_validation_error(info.value)
    assert path == field and message.startswith(field)


def test_window_settings_default_to_extract_longs():
    request = GLiNER2Request.model_validate({"text": "x", "entities": ["company"]})
    assert request.long_text is None and request.window_words == (384, 64)
    small = GLiNER2Request.model_validate({"text": "x", "entities": ["a"], "chunk_size": 10})
    assert small.window_words == (10, 9)
