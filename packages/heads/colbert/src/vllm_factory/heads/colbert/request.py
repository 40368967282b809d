"""The ColBERT request body (``data`` of POST /pooling); no vLLM import, unit-testable.

Two forms:

- encoding: ``{"text": str | [str, ...], "is_query": bool, "encoding_format": ...,
  "embed_dtype": ..., "calibration": ...}`` returns one text's token vectors (a string, JSON
  vectors; its base64 item with base64), or one item per text (a list; ``vectors``: the
  encodings);
- scoring: ``{"query": str, "documents": [str, ...], "top_k": int, "embed_dtype": ...,
  "calibration": ...}`` returns one MaxSim score per document (and the ``top_k`` best), the
  vectors never leaving the server.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator
from vllm_factory.core.request import AtLeastOne, check_texts
from vllm_factory.heads.colbert.vectors import embed_dtype_problem

EmbedDtype = Literal["float32", "float16", "bfloat16", "int8", "uint8", "binary", "ubinary"]

MAX_TEXTS_PER_REQUEST = 1024
# Longer texts would only be truncated after an expensive tokenization.
MAX_CHARS_PER_TEXT = 1_000_000


class VectorsRequest(BaseModel):
    """The fields every multi-vector request shares (ColBERT's, and ColPali's that adds
    images): texts to encode, or a query and documents to score."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] | None = None
    is_query: bool = False
    # "float": nested JSON lists. "base64": each text's [num_tokens, dim] matrix as
    # little-endian float32 bytes, row-major, base64-encoded: ~4x smaller and far cheaper
    # to encode and parse than a JSON list of 65k floats per 512-token document.
    encoding_format: Literal["float", "base64"] = "float"
    # base64 numbers in float32 (default) or, half the bytes, float16 / bfloat16 (vLLM's name
    # for the same option of its own pooling API); or compact vectors (JSON ints or base64):
    # int8 / uint8 (scalar buckets) or binary / ubinary (packed sign bits), as
    # sentence-transformers' ``quantize_embeddings`` makes them (``vllm_factory.core.quantize``).
    embed_dtype: EmbedDtype = "float32"
    # int8 / uint8 only: [[min per dimension], [max per dimension]] (the library's ``ranges``);
    # None: those of every token vector of the request's texts together.
    calibration: list[list[float]] | None = None
    query: str | None = None
    documents: list[str] | None = None
    top_k: AtLeastOne | None = None

    @field_validator("text", "query", "documents")
    @classmethod
    def _valid_texts(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is not None:
            check_texts(value, max_items=MAX_TEXTS_PER_REQUEST, max_chars=MAX_CHARS_PER_TEXT)
        return value

    @property
    def is_scoring(self) -> bool:
        return self.query is not None


class ColBERTRequest(VectorsRequest):
    def problem(self) -> tuple[str, str] | None:
        """(field, message) when the fields do not form one of the two request forms."""
        scoring = {"query", "documents", "top_k"} & self.model_fields_set
        encoding = {"text", "is_query", "encoding_format"} & self.model_fields_set
        if scoring and encoding:
            field = min(encoding)
            return f"data.{field}", (
                f"data.{field}: a scoring request (query, documents) takes no {field}"
            )
        if scoring:
            for field in ("query", "documents"):
                if getattr(self, field) is None:
                    return f"data.{field}", f"data.{field}: field required to score documents"
            return embed_dtype_problem(None, self.embed_dtype, self.calibration)
        if self.text is None:
            return "data.text", "data.text: field required (or data.query and data.documents)"
        return embed_dtype_problem(self.encoding_format, self.embed_dtype, self.calibration)

    @property
    def bare_vectors(self) -> bool:
        """Whether the response is one text's vectors as nested lists (one text, float
        vectors), not one item per text."""
        return isinstance(self.text, str) and self.encoding_format == "float"

    @property
    def texts(self) -> list[str]:
        """The texts to encode: the query then the documents when scoring."""
        if self.is_scoring:
            return [self.query, *self.documents]
        return [self.text] if isinstance(self.text, str) else list(self.text)
