"""Checks every request model shares (pure Python; used inside pydantic field validators)."""

from __future__ import annotations


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
