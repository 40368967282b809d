"""The ColPali request body (``data`` of POST /pooling); no vLLM import, unit-testable.

Two forms:

- encoding: ``{"text": str | [str, ...], "is_query": bool}`` or ``{"image": str | [str, ...]}``
  (each image: raw base64, a ``data:`` URL, an http(s) URL or a local path; see ``images``),
  plus ``"encoding_format": "float" | "base64"`` and, for base64, ``"embed_dtype"``; returns
  one input's token vectors (a string, float vectors; its base64 item with base64), or one
  item per input (a list);
- scoring: ``{"query": str, "images": [str, ...], "documents": [str, ...], "top_k": int}``
  (images and/or text documents) returns one MaxSim score per document, images first, the
  vectors never leaving the server.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, field_validator
from vllm_factory.core.request import AtLeastOne, check_texts
from vllm_factory.heads.colbert.vectors import embed_dtype_problem

MAX_TEXTS_PER_REQUEST = 1024
MAX_IMAGES_PER_REQUEST = 64
MAX_CHARS_PER_TEXT = 1_000_000


def _check_images(value: str | list[str]) -> str | list[str]:
    items = [value] if isinstance(value, str) else value
    if not items:
        raise ValueError("must hold at least one image")
    if len(items) > MAX_IMAGES_PER_REQUEST:
        raise ValueError(f"at most {MAX_IMAGES_PER_REQUEST} images per request")
    if any(not item.strip() for item in items):
        raise ValueError("images must not be empty strings")
    return value


class ColPaliRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] | None = None
    image: str | list[str] | None = None
    is_query: bool = False
    encoding_format: Literal["float", "base64"] = "float"
    # base64 numbers in float32 (default) or, half the bytes, float16 / bfloat16 (vLLM's name
    # for the same option of its own pooling API).
    embed_dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    query: str | None = None
    images: list[str] | None = None
    documents: list[str] | None = None
    top_k: AtLeastOne | None = None
    # The decoded images, in request order (set by the IOProcessor after validation).
    _decoded: list[Any] = PrivateAttr(default_factory=list)

    @field_validator("text", "query", "documents")
    @classmethod
    def _valid_texts(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is not None:
            check_texts(value, max_items=MAX_TEXTS_PER_REQUEST, max_chars=MAX_CHARS_PER_TEXT)
        return value

    @field_validator("image", "images")
    @classmethod
    def _valid_images(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is not None:
            _check_images(value)
        return value

    def problem(self) -> tuple[str, str] | None:
        """(field, message) when the fields do not form one of the request forms."""
        given = self.model_fields_set
        scoring = {"query", "images", "documents", "top_k"} & given
        encoding = {"text", "image", "is_query", "encoding_format", "embed_dtype"} & given
        if scoring and encoding:
            field = min(encoding)
            return f"data.{field}", (
                f"data.{field}: a scoring request (query, images, documents) takes no {field}"
            )
        if scoring:
            if self.query is None:
                return "data.query", "data.query: field required to score images or documents"
            if self.images is None and self.documents is None:
                return "data.images", "data.images: give images and/or documents to score"
            return None
        if self.text is not None and self.image is not None:
            return "data.image", "data.image: send either text or image, not both"
        if self.text is None and self.image is None:
            return "data.text", "data.text: field required (or data.image, or data.query)"
        if self.image is not None and self.is_query:
            return "data.is_query", "data.is_query: images are documents (is_query false only)"
        return embed_dtype_problem(self.encoding_format, self.embed_dtype)

    @property
    def is_scoring(self) -> bool:
        return self.query is not None

    @property
    def one_input(self) -> bool:
        """One text or image given as a string (not a list): answered with its result alone."""
        return not self.is_scoring and (isinstance(self.text, str) or isinstance(self.image, str))

    @property
    def bare_vectors(self) -> bool:
        """Whether the response is one input's vectors as nested lists (one input, float
        vectors), not an item with ``embeddings`` and ``num_tokens``."""
        return self.one_input and self.encoding_format == "float"

    @property
    def image_sources(self) -> list[str]:
        """The images this request sends to the model, in order."""
        if self.is_scoring:
            return list(self.images or [])
        if self.image is None:
            return []
        return [self.image] if isinstance(self.image, str) else list(self.image)

    @property
    def texts(self) -> list[str]:
        """The texts to encode (encoding form), or the text documents (scoring form)."""
        if self.is_scoring:
            return list(self.documents or [])
        if self.text is None:
            return []
        return [self.text] if isinstance(self.text, str) else list(self.text)
