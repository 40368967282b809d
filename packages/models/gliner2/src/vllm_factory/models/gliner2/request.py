"""The GLiNER2 request body (``data`` of POST /pooling); no vLLM import, unit-testable.

``{"text": str | [str], <one schema>, "threshold": 0.5, "include_confidence": false,
"include_spans": false, "max_len": null}``, where the schema is either ``"schema"`` (the
dictionary ``Schema.to_dict()`` / ``Schema.from_dict()`` use, or the one ``Schema.build()``
returns) or exactly one short form: ``"entities"`` (as ``extract_entities`` takes them),
``"classifications"`` (``classify_text``), ``"structures"`` (``extract_json``) or
``"relations"`` (``extract_relations``). ``return_scores`` (debug) adds the per-task scores.
``runtime`` is accepted as ``"classic"`` only (what vLLM Factory 0.2's clients send).

A text whose prompt does not fit the server is handled as ``long_text`` says (null: the
server's ``VLLM_FACTORY_LONG_TEXT``): ``"window"`` reads it whole as ``extract_long`` does
(windows of ``chunk_size`` words, ``chunk_overlap`` shared; null: 384 and 64, the library's
defaults, smaller where such a window does not fit the server), ``"truncate"`` reads as many of its first words as fit, ``"error"`` refuses it.
``return_windows`` wraps each text's result as ``{"result": ..., "windows": n, "truncated":
bool}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from vllm_factory.core.request import as_list, check_probability, check_texts, in_range
from vllm_factory.models.gliner2.schema import (
    SchemaError,
    SchemaPlan,
    check_tasks,
    plan_for,
    short_form,
)
from vllm_factory.models.gliner2.windows import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE

MAX_TEXTS_PER_REQUEST = 64
MAX_CHARS_PER_TEXT = 100_000
MAX_CHUNK_WORDS = MAX_CHARS_PER_TEXT
SHORT_FORMS = ("entities", "classifications", "structures", "relations")


class GLiNER2Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str]
    # "schema" would shadow a BaseModel attribute: the field is schema_, its JSON name "schema".
    schema_: Any = Field(default=None, alias="schema")
    entities: Any = None
    classifications: Any = None
    structures: Any = None
    relations: Any = None
    threshold: float = 0.5
    include_confidence: bool = False
    include_spans: bool = False
    max_len: Annotated[int | None, in_range(1, None, "must be a positive number of words")] = None
    return_scores: bool = False
    # vLLM Factory 0.2's GLiNER2 clients name the extraction runtime; "classic" (the library's
    # one pass over schema and text) is the one this server runs.
    runtime: Literal["classic"] = "classic"
    long_text: Literal["window", "truncate", "error"] | None = None
    chunk_size: Annotated[
        int | None,
        in_range(1, MAX_CHUNK_WORDS, f"must be a number of words from 1 to {MAX_CHUNK_WORDS}"),
    ] = None
    chunk_overlap: int | None = None
    return_windows: bool = False

    @field_validator("text")
    @classmethod
    def _check_text(cls, value: str | list[str]) -> str | list[str]:
        return check_texts(value, max_items=MAX_TEXTS_PER_REQUEST, max_chars=MAX_CHARS_PER_TEXT)

    @field_validator("threshold")
    @classmethod
    def _check_threshold(cls, value: float) -> float:
        return check_probability(value)

    @field_validator("chunk_overlap")
    @classmethod
    def _check_chunk_overlap(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is None:
            return value
        size = info.data.get("chunk_size") or DEFAULT_CHUNK_SIZE
        if not 0 <= value < size:
            raise ValueError(f"must be a number of words from 0 to chunk_size - 1 ({size - 1})")
        return value

    @property
    def window_words(self) -> tuple[int, int]:
        """(chunk_size, chunk_overlap) with the library's defaults."""
        size = DEFAULT_CHUNK_SIZE if self.chunk_size is None else self.chunk_size
        overlap = DEFAULT_CHUNK_OVERLAP if self.chunk_overlap is None else self.chunk_overlap
        return size, min(overlap, size - 1)

    @property
    def texts(self) -> list[str]:
        return as_list(self.text)

    def plan(self) -> SchemaPlan:
        """The schema plan; ``SchemaError`` (a ValueError naming the field) when it is bad."""
        given = [name for name in SHORT_FORMS if getattr(self, name) is not None]
        if self.schema_ is not None:
            if given:
                raise SchemaError(f"data.{given[0]}", "send either 'schema' or one short form")
            return plan_for(self.schema_, "data.schema")
        if not given:
            raise SchemaError("data.schema", "field required (or one of: " +
                              ", ".join(SHORT_FORMS) + ")")  # fmt: skip
        if len(given) > 1:
            raise SchemaError(
                f"data.{given[1]}",
                "send one short form per request (or a 'schema' with several kinds)",
            )
        kind = given[0]
        plan = short_form(kind, getattr(self, kind), f"data.{kind}")
        check_tasks(plan, f"data.{kind}")
        return plan
