"""Nemotron ColEmbed's prompts, as its remote processor builds them (no vLLM import): the
processor settings saved in the checkpoint's ``processor_config.json`` and the chat template
around one user turn."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

# A stand-in for the user text while the template is rendered once (see ChatFrame), and texts
# that a template which trims, escapes or otherwise changes the text would not copy verbatim.
SENTINEL = "\ue000nemotron-colembed-text\ue001"
PROBES = ("", " x ", "\n a\tb \n", "{{ 1 }} {% raw %} <b>&amp;</b> 'q' \"q\"", "é 中 🧾")


@dataclass(frozen=True)
class ProcessorSettings:
    """The remote processor's settings (its defaults, unless the checkpoint saved others)."""

    q_max_length: int = 512
    p_max_length: int = 4096
    query_prefix: str = "query:"
    passage_prefix: str = "passage:"

    @classmethod
    def from_saved(cls, saved: dict[str, Any] | None) -> ProcessorSettings:
        saved = saved or {}
        return cls(**{f.name: saved[f.name] for f in fields(cls) if saved.get(f.name) is not None})

    def query(self, text: str) -> str:
        body = f"{self.query_prefix} {text}" if self.query_prefix else text
        return f"Query: {body}"

    def passage(self, text: str) -> str:
        return f"{self.passage_prefix} {text}" if self.passage_prefix else text


class ChatFrame:
    """The chat template around one user text, rendered once: ``before + text + after`` where
    the template copies the text verbatim (checked on :data:`PROBES`), else rendered per call."""

    def __init__(self, tokenizer: Any, leading: list[dict[str, Any]]) -> None:
        self.tokenizer, self.leading = tokenizer, leading
        parts = self.render(SENTINEL).split(SENTINEL)
        self.frame = (parts[0], parts[1]) if len(parts) == 2 else None
        if self.frame is not None and any(self(p) != self.render(p) for p in PROBES):
            self.frame = None

    def render(self, text: str) -> str:
        content = [*self.leading, {"type": "text", "text": text}]
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
        )

    def __call__(self, text: str) -> str:
        if self.frame is None:
            return self.render(text)
        return self.frame[0] + text + self.frame[1]
