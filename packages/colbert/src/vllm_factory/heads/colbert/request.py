"""The ColBERT request body (``data`` of POST /pooling); no vLLM import, unit-testable."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

MAX_TEXTS_PER_REQUEST = 1024
# Longer texts would only be truncated after an expensive tokenization.
MAX_CHARS_PER_TEXT = 1_000_000


class ColBERTRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str]
    is_query: bool = False
    # "float": nested JSON lists. "base64": each text's [num_tokens, dim] matrix as
    # little-endian float32 bytes, row-major, base64-encoded: ~4x smaller and far cheaper
    # to encode and parse than a JSON list of 65k floats per 512-token document.
    encoding_format: Literal["float", "base64"] = "float"

    @field_validator("text")
    @classmethod
    def _check_text(cls, value: str | list[str]) -> str | list[str]:
        texts = [value] if isinstance(value, str) else value
        if not texts:
            raise ValueError("must hold at least one text")
        if len(texts) > MAX_TEXTS_PER_REQUEST:
            raise ValueError(f"at most {MAX_TEXTS_PER_REQUEST} texts per request")
        for text in texts:
            if not text.strip():
                raise ValueError("texts must not be empty or whitespace only")
            if len(text) > MAX_CHARS_PER_TEXT:
                raise ValueError(f"texts must be at most {MAX_CHARS_PER_TEXT} characters")
        return value

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)
