"""The GLiNER request body (``data`` of POST /pooling); no vLLM import, unit-testable."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, field_validator

MAX_TEXTS_PER_REQUEST = 256
MAX_CHARS_PER_TEXT = 100_000
MAX_LABELS_PER_REQUEST = 256
MAX_CHARS_PER_LABEL = 256


class GLiNERRequest(BaseModel):
    """``{"text": str | [str], "labels": [str, ...], "threshold": 0.5, "flat_ner": true,
    "multi_label": false}``; ``return_scores`` (debug, default false) adds each text's full
    span x label score tensor to the response."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str]
    labels: list[str]
    threshold: float = 0.5
    flat_ner: bool = True
    multi_label: bool = False
    return_scores: bool = False

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

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("must hold at least one label")
        if len(value) > MAX_LABELS_PER_REQUEST:
            raise ValueError(f"at most {MAX_LABELS_PER_REQUEST} labels per request")
        for label in value:
            if not label.strip():
                raise ValueError("labels must not be empty or whitespace only")
            if len(label) > MAX_CHARS_PER_LABEL:
                raise ValueError(f"labels must be at most {MAX_CHARS_PER_LABEL} characters")
        return value

    @field_validator("threshold")
    @classmethod
    def _check_threshold(cls, value: float) -> float:
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError("must be a number between 0 and 1")
        return value

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)
