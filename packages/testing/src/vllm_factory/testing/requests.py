"""Bad requests every text IOProcessor rejects the same way (the shared text rules of
``vllm_factory.core.request.check_texts`` and pydantic's ``extra="forbid"``): a family's request
suite adds its own fields' cases to :func:`bad_text_requests`."""

from __future__ import annotations

from typing import Any

# ``text`` values that are not one non-blank string or a non-empty list of them.
BAD_TEXTS: list[Any] = [3, "", "   ", [], ["fine", 7]]


def bad_text_requests(**valid: Any) -> list[tuple[dict, str]]:
    """``(data, field the 4xx must name)`` pairs: ``text`` missing or bad, and an unknown
    field, each beside the otherwise valid fields ``valid`` (e.g. GLiNER's ``labels``)."""
    cases = [(dict(valid), "data.text")]
    cases += [({"text": text, **valid}, "data.text") for text in BAD_TEXTS]
    cases.append(({"text": "x", **valid, "unknown": 1}, "data.unknown"))
    return cases


def assert_refused(server: Any, data: dict, field: str) -> None:
    """``data`` is answered with a 4xx whose message names ``field``."""
    response = server.pooling(data)
    assert 400 <= response.status_code < 500, response.text
    assert field in response.text, response.text
