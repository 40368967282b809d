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
