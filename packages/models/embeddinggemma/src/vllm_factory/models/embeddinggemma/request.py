"""The EmbeddingGemma request body (``data`` of POST /pooling); no vLLM import.

Checks that need the checkpoint (prompt names, Matryoshka sizes) are done by the
IOProcessor after this model has validated the shape of the request.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator
from vllm_factory.core.quantize import SCALAR_DTYPES, calibration_problem
from vllm_factory.core.request import check_texts

MAX_TEXTS_PER_REQUEST = 1024
# Longer texts would only be truncated after an expensive tokenization.
MAX_CHARS_PER_TEXT = 1_000_000


class EmbeddingGemmaRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str]
    # A key of the checkpoint's ``prompts`` (e.g. "query", "document"); None: the checkpoint's
    # default prompt, or none.
    prompt_name: str | None = None
    # One of the checkpoint's Matryoshka sizes; None: the full dimension.
    dimensions: int | None = None
    # The vectors' numbers: float32, or compact (JSON ints) as sentence-transformers'
    # ``quantize_embeddings`` makes them (``vllm_factory.core.quantize``).
    embed_dtype: Literal["float32", "int8", "uint8", "binary", "ubinary"] = "float32"
    # int8 / uint8 only: [[min per dimension], [max per dimension]] (the library's ``ranges``);
    # None: those of the request's vectors (at least two texts).
    calibration: list[list[float]] | None = None

    @field_validator("text")
    @classmethod
    def _check_text(cls, value: str | list[str]) -> str | list[str]:
        return check_texts(value, max_items=MAX_TEXTS_PER_REQUEST, max_chars=MAX_CHARS_PER_TEXT)

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)

    def problem(self) -> tuple[str, str] | None:
        """(field, message) when ``calibration`` cannot apply."""
        if self.calibration is None:
            return None
        if self.embed_dtype not in SCALAR_DTYPES:
            return "data.calibration", (
                f"data.calibration: applies to embed_dtype int8 or uint8, not {self.embed_dtype}"
            )
        problem = calibration_problem(self.calibration)
        return None if problem is None else ("data.calibration", f"data.calibration: {problem}")
