"""The GLiNER request body (``data`` of POST /pooling); no vLLM import, unit-testable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator
from vllm_factory.core.request import check_probability, check_texts

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
        return check_texts(value, max_items=MAX_TEXTS_PER_REQUEST, max_chars=MAX_CHARS_PER_TEXT)

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, value: list[str]) -> list[str]:
        return check_texts(
            value, max_items=MAX_LABELS_PER_REQUEST, max_chars=MAX_CHARS_PER_LABEL, noun="label"
        )

    @field_validator("threshold")
    @classmethod
    def _check_threshold(cls, value: float) -> float:
        return check_probability(value)

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)
