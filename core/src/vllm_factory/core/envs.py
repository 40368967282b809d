"""The environment variables vLLM Factory reads, in one typed registry (in the manner of vLLM's
own ``vllm/envs.py``): each has a name, a type, a default and a meaning, and is parsed one way.

Read a value with ``envs.get(envs.MAX_REQUEST_CHARS)``: the default when the variable is unset or
empty, the parsed value otherwise, and a ``ValueError`` naming the variable when it cannot be
parsed (a server then stops at start-up, where the value is first read, rather than serve with a
setting it did not mean). ``python -m vllm_factory.core.envs`` lists them all.

This module imports neither vLLM nor torch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected one of {', '.join(_TRUE + _FALSE)}")


def parse_positive_int(raw: str) -> int:
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise ValueError("expected a whole number") from None
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def parse_positive_float(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError("expected a number") from None
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a positive finite number")
    return value


def parse_names(raw: str) -> tuple[str, ...]:
    names = tuple(part.strip().upper() for part in raw.split(",") if part.strip())
    if not names:
        raise ValueError("expected a comma-separated list of names")
    return names


@dataclass(frozen=True)
class Setting(Generic[T]):
    name: str
    default: T
    doc: str
    parse: Callable[[str], T]


REGISTRY: dict[str, Setting] = {}


def _setting(name: str, default: T, parse: Callable[[str], T], doc: str) -> Setting[T]:
    setting = Setting(name, default, doc, parse)
    REGISTRY[name] = setting
    return setting


def get(setting: Setting[T]) -> T:
    """``setting``'s value in this process's environment."""
    raw = os.environ.get(setting.name)
    if raw is None or not raw.strip():
        return setting.default
    try:
        return setting.parse(raw)
    except ValueError as error:
        raise ValueError(f"{setting.name}={raw!r}: {error}") from None


# -- bounded work per request (read by the IOProcessors, in the API server) ---------------------

MAX_REQUEST_CHARS = _setting(
    "VLLM_FACTORY_MAX_REQUEST_CHARS", 2_000_000, parse_positive_int,
    "Characters a request's texts (and labels) may hold in all, each text counted as cut to "
    "what the model reads: vLLM runs an IOProcessor's tokenizing on the API server's event "
    "loop, so this bounds how long one request holds it.",
)  # fmt: skip
GLINER_MAX_CELLS = _setting(
    "VLLM_FACTORY_GLINER_MAX_CELLS", 1 << 25, parse_positive_int,
    "Span x label cells a GLiNER request may score (texts x words x span width x labels): "
    "the engine's score memory for the request and what it sends back (4 bytes a cell).",
)  # fmt: skip
MAX_RETURNED_SCORES = _setting(
    "VLLM_FACTORY_MAX_RETURNED_SCORES", 1 << 20, parse_positive_int,
    "Scores a request may ask back with return_scores (GLiNER cells, GLiNER2 span scores), "
    "each a JSON number in the response.",
)  # fmt: skip
MAX_PROMPT_DATA_BYTES = _setting(
    "VLLM_FACTORY_MAX_PROMPT_DATA_BYTES", 64 * 1024 * 1024, parse_positive_int,
    "Bytes of per-prompt data (GLiNER / GLiNER2 word layouts, bi-encoder label ids) a request "
    "sends the engine, counted once per prompt: vLLM gives every prompt of a request the "
    "request's one set of pooling parameters, so this data travels (and is copied) as many "
    "times as the request has prompts.",
)  # fmt: skip
MAX_ENTITIES = _setting(
    "VLLM_FACTORY_MAX_ENTITIES", 1 << 18, parse_positive_int,
    "Spans a GLiNER / GLiNER2 request may keep as candidates above its threshold (each becomes "
    "a Python object in the API server); a request over it gets a 400 naming the threshold.",
)  # fmt: skip

# -- images (ColPali models) ------------------------------------------------------------------------

IMAGE_MAX_BYTES = _setting(
    "VLLM_FACTORY_IMAGE_MAX_BYTES", 20 * 1024 * 1024, parse_positive_int,
    "Largest encoded image (bytes), inline or fetched.",
)  # fmt: skip
IMAGE_MAX_PIXELS = _setting(
    "VLLM_FACTORY_IMAGE_MAX_PIXELS", 40_000_000, parse_positive_int,
    "Largest image (width x height), checked from the file header before it is decoded.",
)  # fmt: skip
REQUEST_MAX_PIXELS = _setting(
    "VLLM_FACTORY_REQUEST_MAX_PIXELS", 64_000_000, parse_positive_int,
    "Pixels a request's images may hold in all: they are decoded on the API server's event "
    "loop and held until the request's prompts are built.",
)  # fmt: skip
IMAGE_FORMATS = _setting(
    "VLLM_FACTORY_IMAGE_FORMATS", ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF"), parse_names,
    "Image formats (Pillow's names) a request may send; any other is refused before decoding.",
)  # fmt: skip
MEDIA_ALLOW_PRIVATE = _setting(
    "VLLM_FACTORY_MEDIA_ALLOW_PRIVATE", False, parse_flag,
    "Fetch image URLs whose host resolves to a private, loopback, link-local, shared or "
    "otherwise non-public address (cloud metadata endpoints included); refused by default.",
)  # fmt: skip
MEDIA_FETCH_DEADLINE = _setting(
    "VLLM_FACTORY_MEDIA_FETCH_DEADLINE", 5.0, parse_positive_float,
    "Seconds all image URLs of one request may take to fetch, together (one deadline per "
    "request, not per read; also capped by vLLM's VLLM_IMAGE_FETCH_TIMEOUT).",
)  # fmt: skip
MEDIA_MAX_CONCURRENT_FETCHES = _setting(
    "VLLM_FACTORY_MEDIA_MAX_CONCURRENT_FETCHES", 16, parse_positive_int,
    "Image URLs an API server process fetches at once, over all requests.",
)  # fmt: skip


def describe() -> str:
    """Every setting: name, default, meaning (``python -m vllm_factory.core.envs``)."""
    lines = []
    for setting in REGISTRY.values():
        default = setting.default
        if isinstance(default, tuple):
            default = ",".join(default)
        lines.append(f"{setting.name} (default {default})\n    {setting.doc}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
