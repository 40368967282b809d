"""The GLiNER2 prompt, built as the library builds it, and what the engine needs to read it.

No vLLM import. The library lays one sequence out as::

    ( [P] task ( [E] name [E] name ... ) ) [SEP_STRUCT] ( [P] ... ) [SEP_TEXT] prefix words

one "word" per item: every schema item and every text word is tokenized on its own, with no
[CLS] / [SEP] around the whole. Tasks come in a fixed order (structures, entities, relations,
classifications); ``prefix`` lists the choices of structure fields that have them. The text
is split by a regex, lower-cased word by word, and ends with ".", "!" or "?" (one "." is
appended otherwise).

The engine needs, per prompt (:class:`PromptLayout`, sent in ``PoolingParams.extra_kwargs``
keyed by a digest of the prompt's tokens): the token position of every text word's first
sub-token, and per task its kind and the positions of its [P] and child-marker tokens.
"""

from __future__ import annotations

import itertools
import re
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vllm_factory.heads.gliner.prompts import ints_from_wire, ints_to_wire
from vllm_factory.models.gliner2.schema import SchemaPlan

LAYOUT_KEY = "gliner2_layouts"
SEP_STRUCT, SEP_TEXT, P_TOKEN, DESC_TOKEN = "[SEP_STRUCT]", "[SEP_TEXT]", "[P]", "[DESCRIPTION]"
EXAMPLE_TOKEN, OUTPUT_TOKEN = "[EXAMPLE]", "[OUTPUT]"
CHILD_TOKEN = {"json_structures": "[C]", "entities": "[E]", "relations": "[R]",
               "classifications": "[L]"}  # fmt: skip
SPECIAL_TOKENS = (SEP_STRUCT, SEP_TEXT, P_TOKEN, "[C]", "[E]", "[R]", "[L]", EXAMPLE_TOKEN,
                  OUTPUT_TOKEN, DESC_TOKEN)  # fmt: skip
# Task kinds on the wire.
KIND_ENTITIES, KIND_SPANS, KIND_CLASSES = 0, 1, 2
KIND_OF = {"entities": KIND_ENTITIES, "json_structures": KIND_SPANS, "relations": KIND_SPANS,
           "classifications": KIND_CLASSES}  # fmt: skip


# -- words ----------------------------------------------------------------------------------------


BMP_END = 0xFFFF


def _mark_ranges(first: int = 0, last: int = sys.maxunicode) -> str:
    """Every combining mark (Unicode category M) from ``first`` to ``last`` as a regex
    character-class body of ranges."""
    parts, start, previous = [], None, None
    for code in range(first, last + 2):
        if code <= last and unicodedata.category(chr(code)).startswith("M"):
            if start is None:
                start = code
            previous = code
        elif start is not None:
            parts.append(
                re.escape(chr(start)) + ("-" + re.escape(chr(previous)) if previous > start else "")
            )
            start = None
    return "".join(parts)


def word_character() -> str:
    """A regex matching one word character of the library's splitter: letter, digit,
    underscore (``\\w``), combining mark, ZWNJ or ZWJ.

    The library writes it as one class, case-insensitive. Case folding changes no character's
    membership (the unit tests check every code point), so it is matched as written. sre tests
    a class holding a category item range by range, so the marks of the Basic Multilingual
    Plane stay in the class (sre makes a bitmap of those) and the astral ones, a second class,
    are tried only for an astral character: a space or a punctuation mark, tried at every
    word's end and between words, fails without a test of every range."""
    return (
        rf"(?:[\w\u200c\u200d{_mark_ranges(0, BMP_END)}]"
        rf"|(?=[\U00010000-\U0010ffff])[{_mark_ranges(BMP_END + 1)}])"
    )


@lru_cache(maxsize=1)
def word_pattern() -> re.Pattern[str]:
    """The library's whitespace splitter: URLs, e-mail addresses, @handles, word runs (letters,
    digits, underscore, combining marks, ZWNJ / ZWJ) joined by - or _, else one non-space;
    only the URL, e-mail and handle alternatives ignore case (see :func:`word_character`)."""
    word = word_character()
    return re.compile(
        rf"(?i:https?://[^\s]+|www\.[^\s]+"
        rf"|[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{{2,}}"
        rf"|@[a-z0-9_]+)"
        rf"|{word}+(?:[-_]{word}+)*"
        rf"|\S"
    )


@dataclass(frozen=True)
class Words:
    """A text's words as the library keeps them: lower-cased tokens, character offsets into
    the normalised text (``text``), cut at ``max_len`` words."""

    text: str
    tokens: list[str]
    starts: list[int]
    ends: list[int]


def normalise_text(text: str) -> str:
    if not text:
        return "."
    return text if text.endswith((".", "!", "?")) else text + "."


def split_words(text: str, max_len: int | None = None) -> Words:
    text = normalise_text(text)
    # With max_len, the scan stops after that many words (the rest is never read).
    spans = [m.span() for m in itertools.islice(word_pattern().finditer(text), max_len)]
    starts = [start for start, _ in spans]
    ends = [end for _, end in spans]
    return Words(text, [text[s:e].lower() for s, e in spans], starts, ends)


# -- schema items ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    kind: str  # json_structures | entities | relations | classifications
    items: list[str]  # the schema "words" of this task, ( [P] prompt ( ... ) )
    fields: list[str]  # field / label names in prompt order

    @property
    def name(self) -> str:
        """The key the library files this task's result under (its prompt without the
        descriptions; a relation's description stays in it, as in the library)."""
        return self.items[2].split(f" {DESC_TOKEN} ")[0]


def _task(parent: str, fields: Sequence[str], kind: str, prompt: str | None = None,
          descriptions: dict[str, str] | None = None,
          examples: Sequence[tuple[str, str]] = ()) -> Task:  # fmt: skip
    text = f"{parent}: {prompt}" if prompt else parent
    for label, description in (descriptions or {}).items():
        if label in fields:
            text += f" {DESC_TOKEN} {label}: {description}"
    for given, output in examples:
        if output in fields:
            text += f" {EXAMPLE_TOKEN} {given} {OUTPUT_TOKEN} {output}"
    items = ["(", P_TOKEN, text, "("]
    for name in fields:
        items += [CHILD_TOKEN[kind], name]
    return Task(kind, [*items, ")", ")"], list(fields))


def tasks_of(plan: SchemaPlan) -> list[Task]:
    """The schema's tasks in the library's prompt order, with its prompt text."""
    schema, tasks = plan.schema, []
    groups: dict[str, list[dict]] = {}
    for item in schema.get("json_structures", []):
        for parent, fields in item.items():
            groups.setdefault(parent, []).append(fields)
    for parent, occurrences in groups.items():
        names: list[str] = []
        for fields in occurrences:
            names += [n for n in fields if n not in names]
        if names:
            descriptions = schema.get("json_descriptions", {}).get(parent, {})
            tasks.append(_task(parent, names, "json_structures", descriptions=descriptions))
    entities = list(schema.get("entities", {}))
    if entities:
        tasks.append(_task("entities", entities, "entities",
                           descriptions=schema.get("entity_descriptions", {})))  # fmt: skip
    relations: dict[str, list[dict]] = {}
    for item in schema.get("relations", []):
        for parent, fields in item.items():
            relations.setdefault(parent, []).append(fields)
    for parent, occurrences in relations.items():
        prompt = schema.get("relation_descriptions", {}).get(parent)
        tasks.append(_task(parent, list(occurrences[0]), "relations", prompt=prompt))
    for config in schema.get("classifications", []):
        tasks.append(
            _task(
                config["task"],
                config["labels"],
                "classifications",
                prompt=config.get("prompt"),
                descriptions=config.get("label_descriptions"),
                examples=config.get("examples") or (),
            )
        )
    return tasks


def choice_prefix(plan: SchemaPlan) -> list[str]:
    """Words put before the text for structure fields with choices:
    ``( parent: field ( a | b ) , field ( c | d ) )`` per structure occurrence."""
    prefix: list[str] = []
    for item in plan.schema.get("json_structures", []):
        for parent, fields in item.items():
            inner: list[str] = []
            for name, value in fields.items():
                if isinstance(value, dict) and "value" in value and "choices" in value:
                    choices: list[str] = []
                    for i, choice in enumerate(value["choices"]):
                        choices += ["|", choice] if i else [choice]
                    inner += [name, "(", *choices, ")", ","]
            if inner:
                prefix += ["(", f"{parent}:", *inner[:-1], ")"]
    return prefix


# -- the prompt -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptLayout:
    """Per prompt, for the engine: first-sub-token position of every text word (prefix words
    included), and per task its kind and marker positions ([P] first, then one per field)."""

    word_positions: tuple[int, ...]
    tasks: tuple[tuple[int, tuple[int, ...]], ...]

    def to_wire(self) -> bytes:
        out = [len(self.word_positions), *self.word_positions, len(self.tasks)]
        for kind, markers in self.tasks:
            out += [kind, len(markers), *markers]
        return ints_to_wire(out)

    @classmethod
    def from_wire(cls, values: bytes | Sequence[int]) -> PromptLayout:
        """The layout :meth:`to_wire` sent (or its numbers as a flat list); anything else
        raises ``ValueError`` or ``IndexError``."""
        values = ints_from_wire(values).tolist()
        n = values[0]
        words = tuple(values[1 : 1 + n])
        cursor = 1 + n
        tasks = []
        for _ in range(values[cursor]):
            kind, count = values[cursor + 1], values[cursor + 2]
            if kind not in (KIND_ENTITIES, KIND_SPANS, KIND_CLASSES) or count < 1:
                raise ValueError("malformed task in a GLiNER2 prompt layout")
            tasks.append((kind, tuple(values[cursor + 3 : cursor + 3 + count])))
            cursor += 2 + count
        if len(words) != n or cursor != len(values) - 1 or len(tasks[-1][1]) < 1:
            raise ValueError("malformed GLiNER2 prompt layout")
        return cls(words, tuple(tasks))

    def max_position(self) -> int:
        positions = [*self.word_positions, *(p for _, m in self.tasks for p in m)]
        return max(positions, default=-1)


@dataclass(frozen=True)
class Prompt:
    token_ids: list[int]
    layout: PromptLayout
    tasks: list[Task]
    words: Words
    text_tokens: list[str]  # prefix + words, as the span scores are laid out


class PromptBuilder:
    """Prompts of one schema (its tasks and choice prefix), built as the library's
    ``_format_input_with_mapping`` builds them: every item tokenized alone; a word that yields
    no sub-token keeps the position where it would start. ``ids_of(item)``: an item's token
    ids. The schema part (its ids and marker positions) is the same for every text: built once,
    here, and each text only appends its words."""

    def __init__(self, tasks: Sequence[Task], prefix: Sequence[str],
                 ids_of: Callable[[str], Sequence[int]]) -> None:  # fmt: skip
        self.tasks = list(tasks)
        self.prefix = list(prefix)
        self.ids_of = ids_of
        ids: list[int] = []
        layout_tasks = []
        for index, task in enumerate(self.tasks):
            if index:
                ids += ids_of(SEP_STRUCT)
            markers = []
            for position, item in enumerate(task.items):
                # [P] (item 1) and the child markers (items 4, 6, ... before the closing brackets)
                if position == 1 or (4 <= position < len(task.items) - 2 and position % 2 == 0):
                    markers.append(len(ids))
                ids += ids_of(item)
            layout_tasks.append((KIND_OF[task.kind], tuple(markers)))
        ids += ids_of(SEP_TEXT)
        self.schema_ids = ids
        self.layout_tasks = tuple(layout_tasks)
        self.prefix_ids = [ids_of(token) for token in self.prefix]

    def build(self, words: Words) -> Prompt:
        ids = list(self.schema_ids)
        positions = []
        ids_of = self.ids_of
        for token_ids in [*self.prefix_ids, *map(ids_of, words.tokens)]:
            positions.append(len(ids))
            ids += token_ids
        layout = PromptLayout(tuple(positions), self.layout_tasks)
        return Prompt(ids, layout, self.tasks, words, [*self.prefix, *words.tokens])


def build_prompt(
    tasks: Sequence[Task],
    prefix: Sequence[str],
    words: Words,
    tokenize: Callable[[str], list[str]],
    to_ids: Callable[[list[str]], list[int]],
) -> Prompt:
    """Token ids and layout of one text (:class:`PromptBuilder`, the items' sub-tokens from
    ``tokenize`` and their ids from ``to_ids``)."""
    return PromptBuilder(tasks, prefix, lambda item: to_ids(tokenize(item))).build(words)


def layout_for(extra: Any, key: str) -> PromptLayout | None:
    """The layout the IOProcessor attached to the prompt with digest ``key``; None (never an
    exception) for vLLM's start-up dummy runs and for requests that bypassed the IOProcessor."""
    layouts = extra.get(LAYOUT_KEY) if extra else None
    if not layouts:
        return None
    values = layouts.get(key)
    if values is None:
        return None
    try:
        return PromptLayout.from_wire(values)
    except (TypeError, ValueError, IndexError):
        return None
