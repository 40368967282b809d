"""The ColPali request body (``data`` of POST /pooling); no vLLM import, unit-testable.

Two forms:

- encoding: ``{"text": str | [str, ...], "is_query": bool}`` or ``{"image": str | [str, ...]}``
  (each image: raw base64, a ``data:`` URL, an http(s) URL or a local path; see ``images``),
  plus ``"encoding_format": "float" | "base64"``, ``"embed_dtype"`` and ``"calibration"``; returns
  one input's token vectors (a string, float vectors; its base64 item with base64), or one
  item per input (a list);
- scoring: ``{"query": str, "images": [str, ...], "documents": [str, ...], "top_k": int}``
  (images and/or text documents; ``embed_dtype`` and ``calibration`` pick the vectors scored)
  returns one MaxSim score per document, images first, the
  vectors never leaving the server.
"""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr, field_validator
from vllm_factory.core.request import as_list
from vllm_factory.heads.colbert.request import VectorsRequest
from vllm_factory.heads.colbert.vectors import embed_dtype_problem

MAX_IMAGES_PER_REQUEST = 64


def _check_images(value: str | list[str]) -> str | list[str]:
    items = [value] if isinstance(value, str) else value
    if not items:
        raise ValueError("must hold at least one image")
    if len(items) > MAX_IMAGES_PER_REQUEST:
        raise ValueError(f"at most {MAX_IMAGES_PER_REQUEST} images per request")
    if any(not item.strip() for item in items):
        raise ValueError("images must not be empty strings")
    return value


class ColPaliRequest(VectorsRequest):
    image: str | list[str] | None = None
    images: list[str] | None = None
    # The decoded images, in request order (set by the IOProcessor after validation).
    _decoded: list[Any] = PrivateAttr(default_factory=list)

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
        encoding = {"text", "image", "is_query", "encoding_format"} & given
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
            return embed_dtype_problem(None, self.embed_dtype, self.calibration)
        if self.text is not None and self.image is not None:
            return "data.image", "data.image: send either text or image, not both"
        if self.text is None and self.image is None:
            return "data.text", "data.text: field required (or data.image, or data.query)"
        if self.image is not None and self.is_query:
            return "data.is_query", "data.is_query: images are documents (is_query false only)"
        return embed_dtype_problem(self.encoding_format, self.embed_dtype, self.calibration)

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
        return as_list(self.images if self.is_scoring else self.image)

    @property
    def texts(self) -> list[str]:
        """The texts to encode (encoding form), or the text documents (scoring form)."""
        return as_list(self.documents if self.is_scoring else self.text)
