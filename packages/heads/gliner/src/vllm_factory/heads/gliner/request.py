"""The GLiNER request body (``data`` of POST /pooling); no vLLM import, unit-testable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator
from vllm_factory.core.request import check_probability, check_texts

MAX_TEXTS_PER_REQUEST = 256
MAX_CHARS_PER_TEXT = 100_000
# Labels per request: a bi-encoder scores each label on its own (entity linking sends every
# candidate of a text at once); a uni-encoder's labels share the prompt with the text, so its
# IOProcessor refuses more than UNI_ENCODER_MAX_LABELS.
MAX_LABELS_PER_REQUEST = 2048
UNI_ENCODER_MAX_LABELS = 256
MAX_CHARS_PER_LABEL = 4096  # entity-linking labels carry descriptions
MAX_SPANS_PER_TEXT = 4096
MAX_WORDS_PER_TEXT = 100_000


class CharSpan(BaseModel):
    """A character span ``[start, end)`` of a text (an L1 mention, for instance)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    start: int
    end: int


class GLiNERRequest(BaseModel):
    """``{"text": str | [str], "labels": [str, ...], "threshold": 0.5, "flat_ner": true,
    "multi_label": false}``; ``return_scores`` (debug, default false) adds each text's full
    span x label score tensor to the response.

    As gliner's ``inference`` takes them: ``input_spans`` (one list of ``{"start", "end"}``
    character spans per text, or null for a text: only those spans are classified; spans that
    do not start and end on word boundaries are dropped, as gliner drops them) and
    ``return_class_probs`` (each entity gets ``class_probs``: its span's five most probable
    labels with their scores). ``max_len``: words per text gliner keeps (its
    ``from_pretrained(max_length=...)``; default: the checkpoint's ``max_len``); the prompt is
    still cut at the tokenizer's limit."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str]
    labels: list[str]
    threshold: float = 0.5
    flat_ner: bool = True
    multi_label: bool = False
    return_scores: bool = False
    input_spans: list[list[CharSpan] | None] | None = None
    return_class_probs: bool = False
    max_len: int | None = None

    @field_validator("max_len")
    @classmethod
    def _check_max_len(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= MAX_WORDS_PER_TEXT:
            raise ValueError(f"must be between 1 and {MAX_WORDS_PER_TEXT} words")
        return value

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

    def input_span_problem(self) -> str | None:
        """What is wrong with ``input_spans`` given the texts (a message naming the field), or
        None."""
        if self.input_spans is None:
            return None
        texts = self.texts
        if len(self.input_spans) != len(texts):
            return (
                f"data.input_spans: one list per text ({len(texts)}), got {len(self.input_spans)}"
            )
        for i, (text, spans) in enumerate(zip(texts, self.input_spans)):
            if spans is not None and len(spans) > MAX_SPANS_PER_TEXT:
                return f"data.input_spans[{i}]: at most {MAX_SPANS_PER_TEXT} spans per text"
            for j, span in enumerate(spans or ()):
                if not 0 <= span.start < span.end <= len(text):
                    return (
                        f"data.input_spans[{i}][{j}]: need 0 <= start < end <= {len(text)} "
                        f"(the text's length), got start {span.start}, end {span.end}"
                    )
        return None

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)
