"""Checks every request model shares and how their errors read (pure Python and pydantic; no
vLLM, so the request models are unit-tested without it)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Annotated

from pydantic import AfterValidator, ValidationError


def check_texts(
    value: str | list[str], *, max_items: int, max_chars: int, noun: str = "text"
) -> str | list[str]:
    """``value`` (one string or a list) when it holds 1 to ``max_items`` non-blank strings of at
    most ``max_chars`` characters; else ``ValueError`` with a message for a 400 response."""
    items = [value] if isinstance(value, str) else value
    if not items:
        raise ValueError(f"must hold at least one {noun}")
    if len(items) > max_items:
        raise ValueError(f"at most {max_items} {noun}s per request")
    for item in items:
        if not item.strip():
            raise ValueError(f"{noun}s must not be empty or whitespace only")
        if len(item) > max_chars:
            raise ValueError(f"{noun}s must be at most {max_chars} characters")
    return value


def check_probability(value: float) -> float:
    """``value`` when it is a finite number in [0, 1] (thresholds); else ``ValueError``."""
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError("must be a number between 0 and 1")
    return value


def check_at_least_one(value: int) -> int:
    """``value`` when it is at least 1 (counts such as ``top_k``); else ``ValueError``."""
    if value < 1:
        raise ValueError("must be at least 1")
    return value


# A request field counting something (``top_k``): an int of at least 1.
AtLeastOne = Annotated[int, AfterValidator(check_at_least_one)]


def in_range(low: int, high: int | None, message: str) -> AfterValidator:
    """The validator of an optional int field, ``Annotated[int | None, in_range(...)]``: the
    value when it is None or from ``low`` to ``high`` (None: no upper bound); else
    ``ValueError(message)``, the 400's text."""

    def check(value: int | None) -> int | None:
        if value is not None and (value < low or (high is not None and value > high)):
            raise ValueError(message)
        return value

    return AfterValidator(check)


def as_list(value: str | Sequence[str] | None) -> list[str]:
    """A field given as one string or a list of them (or left out) as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def describe_validation_error(error: ValidationError, root: str = "data") -> tuple[str, str]:
    """The first problem of a pydantic error as (field path, message), e.g. ``data.text``."""
    first = error.errors()[0]
    # Union members appear in the location as type names ("str", "list[str]"): drop them.
    parts = [str(p) for p in first["loc"] if str(p) not in _TYPE_TAGS and "[" not in str(p)]
    path = ".".join([root, *parts])
    message = first["msg"].removeprefix("Value error, ")
    return path, f"{path}: {message}"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate_path(value: object, path: str = "data") -> str | None:
    """The path (``data.text.3``) of the first string in ``value`` (JSON: dicts, lists,
    strings, numbers) that holds a lone UTF-16 surrogate, or None. Dict keys count too."""
    if isinstance(value, str):
        return path if _LONE_SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}"
            if isinstance(key, str) and _LONE_SURROGATE.search(key):
                # the path goes back in a JSON error: the surrogate written as its escape
                return where.encode("utf-8", "backslashreplace").decode("utf-8")
            found = lone_surrogate_path(item, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = lone_surrogate_path(item, f"{path}.{index}")
            if found is not None:
                return found
    return None
