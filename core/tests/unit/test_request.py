"""The text checks every request model shares: what passes, and the message a 400 carries."""

import pytest
from vllm_factory.core.request import check_texts


@pytest.mark.parametrize("value", ["one text", ["a", "b c"], ["x" * 10]])
def test_accepts_and_returns_the_value_unchanged(value):
    assert check_texts(value, max_items=2, max_chars=10) is value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "at least one document"),
        (["a", "b", "c"], "at most 2 documents"),
        ("  \n", "documents must not be empty"),
        (["fine", ""], "documents must not be empty"),
        (["x" * 11], "at most 10 characters"),
    ],
)
def test_refuses_with_a_message_naming_the_rule(value, message):
    with pytest.raises(ValueError, match=message):
        check_texts(value, max_items=2, max_chars=10, noun="document")


def test_lone_surrogates_are_found_by_path():
    from vllm_factory.core.request import lone_surrogate_path

    assert lone_surrogate_path({"text": "café 😀", "labels": ["a"]}) is None
    assert lone_surrogate_path({"text": "caf\ud800e"}) == "data.text"
    assert lone_surrogate_path({"text": ["ok", "x\udfff"]}) == "data.text.1"
    assert lone_surrogate_path({"schema": {"bad\ud800key": 1}}) == "data.schema.bad\\ud800key"
    assert lone_surrogate_path([1, 2.5, None, True]) is None
