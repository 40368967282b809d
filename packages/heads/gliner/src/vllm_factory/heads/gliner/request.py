"""The GLiNER request body (``data`` of POST /pooling); no vLLM import, unit-testable."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, field_validator
from vllm_factory.core.request import as_list, check_probability, check_texts, in_range

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
MAX_CANDIDATE_ID_CHARS = 512
# Linking with chunks (max_labels): prompts per request = texts x chunks (uni-encoders).
MAX_PROMPTS_PER_REQUEST = 1024


class CharSpan(BaseModel):
    """A character span ``[start, end)`` of a text (an L1 mention, for instance)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    start: int
    end: int


class LinkCandidate(BaseModel):
    """An entity-linking candidate: ``id`` (returned as given), ``label`` (its name),
    ``description``, and any other fields the request's ``template`` names."""

    model_config = ConfigDict(extra="allow", strict=True)

    id: str | int
    label: str
    description: str | None = None

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str | int) -> str | int:
        if isinstance(value, str) and not 0 < len(value) <= MAX_CANDIDATE_ID_CHARS:
            raise ValueError(f"must be 1 to {MAX_CANDIDATE_ID_CHARS} characters")
        return value

    @field_validator("label")
    @classmethod
    def _check_label(cls, value: str) -> str:
        return check_texts(value, max_items=1, max_chars=MAX_CHARS_PER_LABEL, noun="label")


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
    still cut at the tokenizer's limit.

    Entity linking (:mod:`~vllm_factory.heads.gliner.linking`): ``candidates`` instead of
    ``labels`` (``[{"id", "label", "description", ...}]``; an id twice must be the same
    candidate twice), ``template`` (how a
    candidate becomes a label, default ``"{label}"``), ``max_labels`` (reranking: labels
    scored in chunks of this many, best entity per span kept); entities then carry
    ``class_probs``, ``candidate_id`` and ranked ``candidates``.

    Linking in vLLM Factory 0.2's form: ``labels`` (entity types) with ``candidate_labels`` (names of
    the entities to link to): entities are found by their types as without it, and each gets
    ``linked_to``, the candidate label its span scores highest (null when no candidate
    reaches the threshold), and ``linked_score``, that score.

    Texts longer than ``max_len`` words (:mod:`~vllm_factory.heads.gliner.windows`):
    ``long_text`` ``"window"`` (read whole, in windows of ``max_len`` words of which
    consecutive ones share ``window_overlap``, merged), ``"truncate"`` (the first ``max_len``
    words, as gliner) or ``"error"`` (a 400 naming the text); unset, the server's
    ``VLLM_FACTORY_LONG_TEXT``. ``return_windows``: each text's result is
    ``{"entities", "windows", "truncated"}`` (and ``"scores"`` with ``return_scores``).

    Relation extraction (relex checkpoints, gliner's ``predict_relations``): ``relations``
    (the relation labels), ``relation_threshold`` and ``adjacency_threshold`` (both default to
    ``threshold``); each text's result is then ``{"entities", "relations"}``, a relation
    ``{"head", "tail", "relation", "score"}`` with head and tail ``{"start", "end", "text",
    "type", "entity_idx"}`` (character offsets; ``entity_idx``: the entity's index in
    ``entities``). A text is read in one window (``long_text`` ``"truncate"`` by default, as
    gliner reads it)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    # The IOProcessor's label plan, made once when the prompts are built (not a field).
    _plan: Any = PrivateAttr(default=None)
    # Each text's words and windows, split once for both its prompts and its response (not a
    # field): TextWindows per text.
    _words: Any = PrivateAttr(default=None)

    text: str | list[str]
    labels: list[str] | None = None
    threshold: float = 0.5
    flat_ner: bool = True
    multi_label: bool = False
    return_scores: bool = False
    input_spans: list[list[CharSpan] | None] | None = None
    return_class_probs: bool = False
    max_len: Annotated[
        int | None,
        in_range(1, MAX_WORDS_PER_TEXT, f"must be between 1 and {MAX_WORDS_PER_TEXT} words"),
    ] = None
    candidates: list[LinkCandidate] | None = None
    template: str = "{label}"
    max_labels: Annotated[
        int | None,
        in_range(1, UNI_ENCODER_MAX_LABELS, f"must be between 1 and {UNI_ENCODER_MAX_LABELS}"),
    ] = None
    candidate_labels: list[str] | None = None
    long_text: Literal["window", "truncate", "error"] | None = None
    window_overlap: Annotated[
        int | None,
        in_range(0, MAX_WORDS_PER_TEXT // 2, "must be between 0 and max_len // 2 words"),
    ] = None
    return_windows: bool = False
    relations: list[str] | None = None
    relation_threshold: float | None = None
    adjacency_threshold: float | None = None

    @field_validator("candidates")
    @classmethod
    def _check_candidates(cls, value: list[LinkCandidate] | None) -> list[LinkCandidate] | None:
        if value is None:
            return value
        if not value:
            raise ValueError("must hold at least one candidate")
        if len(value) > MAX_LABELS_PER_REQUEST:
            raise ValueError(f"at most {MAX_LABELS_PER_REQUEST} candidates per request")
        # The same candidate twice (glinker's L2 lists an entity once per mention) is one
        # candidate; one id with two different contents is an error.
        seen: dict[str | int, int] = {}
        for index, candidate in enumerate(value):
            first = seen.setdefault(candidate.id, index)
            if first != index and candidate != value[first]:
                raise ValueError(
                    f"[{index}] has the id {candidate.id!r} of [{first}] with other fields; "
                    "ids must be unique"
                )
        return value

    @field_validator("text")
    @classmethod
    def _check_text(cls, value: str | list[str]) -> str | list[str]:
        return check_texts(value, max_items=MAX_TEXTS_PER_REQUEST, max_chars=MAX_CHARS_PER_TEXT)

    @field_validator("labels", "candidate_labels", "relations")
    @classmethod
    def _check_labels(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        return check_texts(
            value, max_items=MAX_LABELS_PER_REQUEST, max_chars=MAX_CHARS_PER_LABEL, noun="label"
        )

    @field_validator("threshold")
    @classmethod
    def _check_threshold(cls, value: float) -> float:
        return check_probability(value)

    @field_validator("relation_threshold", "adjacency_threshold")
    @classmethod
    def _check_relation_threshold(cls, value: float | None) -> float | None:
        return None if value is None else check_probability(value)

    def labels_problem(self) -> tuple[str, str] | None:
        """(field, message) when the request has neither or both of ``labels`` and
        ``candidates``, or linking options without candidates; else None."""
        if self.labels is None and self.candidates is None:
            return "data.labels", "data.labels: send labels, or candidates to link"
        if self.labels is not None and self.candidates is not None:
            return "data.candidates", "data.candidates: send labels or candidates, not both"
        if self.candidate_labels is not None:
            if self.labels is None:
                return "data.labels", "data.labels: candidate_labels link entities found by labels"
            if len(self.labels) + len(self.candidate_labels) > MAX_LABELS_PER_REQUEST:
                return "data.candidate_labels", (
                    f"data.candidate_labels: labels and candidate_labels hold at most "
                    f"{MAX_LABELS_PER_REQUEST} together"
                )
        if self.relations is None:
            for name in ("relation_threshold", "adjacency_threshold"):
                if getattr(self, name) is not None:
                    return f"data.{name}", f"data.{name}: only with data.relations"
        elif self.candidates is not None or self.candidate_labels is not None:
            field = "data.candidates" if self.candidates is not None else "data.candidate_labels"
            return field, f"{field}: entity linking does not combine with data.relations"
        if self.candidates is None:
            if self.max_labels is not None:
                return "data.max_labels", "data.max_labels: only with data.candidates"
            if "template" in self.model_fields_set:
                return "data.template", "data.template: only with data.candidates"
        return None

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
        return as_list(self.text)
