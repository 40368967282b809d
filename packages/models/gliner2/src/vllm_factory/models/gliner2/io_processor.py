"""``deberta_gliner2_io``: GLiNER2 request handling inside vLLM's API server.

Request ``data``: see :class:`~vllm_factory.models.gliner2.request.GLiNER2Request`.
Response ``data``: per text (a list when ``text`` is a list), the dictionary
``GLiNER2.extract`` returns for the same schema and options (``extract_long`` for a text too
long for one prompt, read in windows: :mod:`~vllm_factory.models.gliner2.windows`); with ``return_scores`` it is
``{"result": ..., "scores": [...]}`` (per task: name, kind, predicted count, the span score
tensor ``[instances, fields, text tokens, max_width]`` or the label probabilities).

What crosses to the engine per prompt: its token ids, plus in ``PoolingParams.extra_kwargs``
its layout (word and marker positions, a few bytes per word) keyed by a digest of its tokens.
The engine sends back counts, span scores and class logits; thresholds, overlap removal and
formatting run here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from vllm_factory.core import compat, envs, metrics
from vllm_factory.core.io_processor import FactoryIOProcessor, budget_check
from vllm_factory.heads.gliner.decoding import TooManyCandidates
from vllm_factory.heads.gliner.prompts import prompt_key
from vllm_factory.models.gliner2 import ARCHITECTURE
from vllm_factory.models.gliner2.decoding import (
    CandidateBudget,
    Options,
    extract,
    format_results,
    split_output,
    to_json,
)
from vllm_factory.models.gliner2.prompts import (
    LAYOUT_KEY,
    SPECIAL_TOKENS,
    Prompt,
    PromptBuilder,
    Words,
    choice_prefix,
    split_words,
    tasks_of,
)
from vllm_factory.models.gliner2.request import GLiNER2Request
from vllm_factory.models.gliner2.schema import SchemaError, SchemaPlan, is_build_form
from vllm_factory.models.gliner2.settings import GLiNER2Settings, read_settings
from vllm_factory.models.gliner2.windows import (
    Window,
    fitted_overlap,
    merge_windows,
    smaller_size,
    split_windows,
    word_ends,
)

logger = logging.getLogger(__name__)
TOKENIZE_CACHE = 65536
BUILDER_CACHE = 256  # schemas whose prompt builder is kept
FIT_TRIES = 4  # window sizes tried per text when the request leaves chunk_size to the server


@dataclass
class Reading:
    """How one text is read: its prompt, or its windows' prompts (``document``: the text the
    windows' offsets index); ``truncated``: only its start is read (``long_text`` "truncate")."""

    prompts: list[Prompt]
    document: str = ""
    windows: list[Window] | None = None
    truncated: bool = False
    chunk: tuple[int, int] = (0, 0)  # the windows' (words, words shared)


class GLiNER2IOProcessor(FactoryIOProcessor[GLiNER2Request]):
    architecture = ARCHITECTURE

    request_model = GLiNER2Request
    selected_by = "--config-format gliner2"

    def setup(self) -> None:
        self.settings: GLiNER2Settings = read_settings(self.checkpoint)
        self.tokenizer = self.checkpoint.tokenizer()
        unknown = [
            t for t in SPECIAL_TOKENS
            if self.tokenizer.convert_tokens_to_ids(t) in (None, self.tokenizer.unk_token_id)
        ]  # fmt: skip
        if unknown:
            raise ValueError(f"the tokenizer lacks GLiNER2's {unknown}: not a GLiNER2 checkpoint")
        self.token_ids = lru_cache(maxsize=TOKENIZE_CACHE)(self._token_ids)
        self._builders: dict[tuple, PromptBuilder] = {}
        self._latest = threading.local()  # pre_process -> merge_pooling_params, same thread
        # The last plans and prompts per request id, for build_response.
        self._built: dict[str | None, tuple[SchemaPlan, list[Reading]]] = {}
        self._built_lock = threading.Lock()

    def _token_ids(self, item: str) -> tuple[int, ...]:
        """The ids of one schema item or text word, tokenized alone."""
        return tuple(self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(item)))

    # -- request -> prompts --------------------------------------------------------------------

    def plan(self, request: GLiNER2Request) -> SchemaPlan:
        try:
            return request.plan()
        except SchemaError as error:
            raise compat.validation_error(str(error), error.field) from None

    def prompts(self, request: GLiNER2Request, plan: SchemaPlan) -> list[Reading]:
        """Per text, how it is read: one prompt, or (too long, ``long_text`` "window") one
        prompt per window; bounded (characters read, windows) before any window is tokenized."""
        mode = request.long_text or envs.get(envs.LONG_TEXT)
        build = self._builder(plan)
        # Every word takes a token: a text of more words than the server's limit never fits,
        # whatever its tokens, so no more than that many are read.
        cap = self.max_model_len + 1
        limit = cap if request.max_len is None else min(request.max_len, cap)
        fields = [
            "data.text" if isinstance(request.text, str) else f"data.text[{index}]"
            for index in range(len(request.texts))
        ]
        texts = [split_words(text, limit) for text in request.texts]
        readings: list[Reading | None] = [None] * len(texts)
        if mode == "window":  # texts known too long without tokenizing: windowed first
            for index, words in enumerate(texts):
                if len(words.tokens) >= cap:
                    readings[index] = self._windows(request, index)
        self._check_reading(request, texts, readings)
        for index, words in enumerate(texts):
            if readings[index] is not None:
                continue
            field = fields[index]
            if len(words.tokens) >= cap:
                if mode == "error":
                    raise self.too_long(field, f"more than {self.max_model_len} words")
                words = split_words(request.texts[index], self.max_model_len)
            prompt = build(words)
            if len(prompt.token_ids) <= self.max_model_len and len(words.tokens) < len(
                texts[index].tokens
            ):  # truncate: the words that fit are already read
                readings[index] = Reading([prompt], truncated=True)
            elif len(prompt.token_ids) <= self.max_model_len:
                readings[index] = Reading([prompt])
            elif mode == "window" and len(words.tokens) > 1:
                readings[index] = self._windows(request, index)
                self._check_reading(request, texts, readings)
            elif mode == "truncate" and len(words.tokens) > 1:
                start = self._fitting_start(request.texts[index], words, build, field)
                readings[index] = Reading([start], truncated=True)
            else:
                raise self.too_long(field, f"schema and text take {len(prompt.token_ids)} tokens")
        for reading in readings:
            if reading.windows is not None:
                reading.prompts.extend(self._window_prompts(
                    request, reading, build, lambda: self._check_reading(request, texts, readings)
                ))  # fmt: skip
        return readings  # type: ignore[return-value]

    def _builder(self, plan: SchemaPlan) -> Callable[[Words], Prompt]:
        """The schema's prompt builder, kept per schema prompt (tasks and choice prefix): a
        server mostly sees the same few schemas, whose part of the prompt is then tokenized
        once."""
        tasks, prefix = tasks_of(plan), choice_prefix(plan)
        key = (tuple((t.kind, tuple(t.items), tuple(t.fields)) for t in tasks), tuple(prefix))
        builder = self._builders.get(key)
        if builder is None:
            builder = PromptBuilder(tasks, prefix, self.token_ids)
            self._builders[key] = builder
            while len(self._builders) > BUILDER_CACHE:
                self._builders.pop(next(iter(self._builders)), None)
        return builder.build

    def _windows(self, request: GLiNER2Request, index: int) -> Reading:
        """The text's windows (the text as ``max_len`` leaves it), no prompt built yet."""
        text = request.texts[index]
        if request.max_len is not None:
            words = word_ends(text, request.max_len + 1)
            if len(words) > request.max_len:
                text = text[: words[request.max_len - 1][1]]
        size, overlap = request.window_words
        if request.chunk_size is None:  # a window of more words than the server reads never fits
            size = min(size, self.max_model_len)
            overlap = fitted_overlap(size, overlap)
        windows = split_windows(text, size, overlap)
        return Reading([], document=text, windows=windows, chunk=(size, overlap))

    def _window_prompts(self, request: GLiNER2Request, reading: Reading,
                        build: Callable[[Words], Prompt], recheck: Callable[[], None],
                        ) -> list[Prompt]:  # fmt: skip
        """The prompts of a text's windows. With ``chunk_size`` given, its windows as asked;
        without, where one does not fit, the text is split again in windows shrunk in
        proportion to the longest one's text tokens (at most :data:`FIT_TRIES` sizes, the
        budgets checked again before each split is tokenized)."""
        if request.chunk_size is not None:
            return [self._window_prompt(w, reading.chunk[0], build) for w in reading.windows or ()]
        for attempt in range(FIT_TRIES):
            size = reading.chunk[0]
            prompts = [build(split_words(w.text, size)) for w in reading.windows or ()]
            longest = max(prompts, key=lambda p: len(p.token_ids))
            tokens = len(longest.token_ids)
            if tokens <= self.max_model_len:
                return prompts
            prefix = len(longest.text_tokens) - len(longest.words.tokens)
            schema = (longest.layout.word_positions[prefix:] or (tokens,))[0]
            smaller = smaller_size(len(longest.words.tokens), tokens, self.max_model_len, schema)
            if smaller is None or attempt == FIT_TRIES - 1:
                break
            _, asked = request.window_words
            reading.chunk = (smaller, fitted_overlap(smaller, asked))
            reading.windows = split_windows(reading.document, *reading.chunk)
            recheck()
        raise self.too_long("data.chunk_size", f"a window of {len(longest.words.tokens)} words "
                            f"and the schema take {tokens} tokens", "lower data.chunk_size")  # fmt: skip

    def _check_reading(self, request: GLiNER2Request, texts: list[Words],
                       readings: list[Reading | None]) -> None:  # fmt: skip
        windows = sum(1 if r is None or r.windows is None else len(r.windows) for r in readings)
        budget_check("data.text", windows, envs.get(envs.MAX_WINDOWS),
                     "windows (prompts of the texts read in windows, data.chunk_size words each)",
                     envs.MAX_WINDOWS.name,
                     "raise data.chunk_size or send the texts in several requests")  # fmt: skip
        chars = sum(
            (words.ends[-1] if words.ends else 0)
            if reading is None or reading.windows is None
            else sum(len(w.text) for w in reading.windows)
            for words, reading in zip(texts, readings)
        )
        budget_check("data.text", chars, envs.get(envs.MAX_REQUEST_CHARS),
                     "characters (as far as each text is read)", envs.MAX_REQUEST_CHARS.name,
                     "send the texts in several requests")  # fmt: skip

    def _window_prompt(self, window: Window, size: int,
                       build: Callable[[Words], Prompt]) -> Prompt:  # fmt: skip
        words = split_words(window.text, size)
        what = f"a window of {len(words.tokens)} words"
        if len(words.tokens) > self.max_model_len:
            raise self.too_long("data.chunk_size", what, "lower data.chunk_size")
        prompt = build(words)
        if len(prompt.token_ids) > self.max_model_len:
            raise self.too_long("data.chunk_size", f"{what} and the schema take "
                                f"{len(prompt.token_ids)} tokens", "lower data.chunk_size")  # fmt: skip
        return prompt

    def _fitting_start(self, text: str, words: Words, build: Callable[[Words], Prompt],
                       field: str) -> Prompt:  # fmt: skip
        """The prompt of the most first words of ``text`` that fit (at least one word)."""
        low, high = 1, len(words.tokens) - 1  # ``high + 1`` words do not fit
        best = build(split_words(text, 1))
        if len(best.token_ids) > self.max_model_len:
            raise self.too_long(field, f"the schema and one word take {len(best.token_ids)} tokens")
        while low < high:
            middle = (low + high + 1) // 2
            prompt = build(split_words(text, middle))
            if len(prompt.token_ids) <= self.max_model_len:
                low, best = middle, prompt
            else:
                high = middle - 1
        return best

    def too_long(self, field: str, what: str, advice: str = "") -> Exception:
        advice = advice or (
            "send a shorter text, set max_len, or read it in windows (data.long_text "
            '"window") or its start only ("truncate")'
        )
        return compat.validation_error(
            f"{field}: {what}, more than the server's limit of {self.max_model_len} tokens "
            f"(--max-model-len); {advice}",
            field,
            metrics.OVER_LIMIT,
        )

    def build_prompts(self, request: GLiNER2Request) -> list[list[int]]:
        plan = self.plan(request)
        readings = self.prompts(request, plan)
        prompts = [p for reading in readings for p in reading.prompts]
        layouts = {prompt_key(p.token_ids): p.layout.to_wire() for p in prompts}
        size = sum(len(wire) for wire in layouts.values()) * len(prompts)
        budget_check("data.text", size, envs.get(envs.MAX_PROMPT_DATA_BYTES),
                     "bytes of word layouts sent with each of its prompts",
                     envs.MAX_PROMPT_DATA_BYTES.name, "send fewer texts per request")  # fmt: skip
        self._latest.layouts = layouts
        self._latest.built = (plan, readings)
        return [p.token_ids for p in prompts]

    def pre_process(self, prompt: GLiNER2Request, request_id: str | None = None, **kwargs: Any):
        out = super().pre_process(prompt, request_id, **kwargs)
        with self._built_lock:
            self._built[request_id] = self._latest.built
            while len(self._built) > len(self._pending) + 64:
                self._built.pop(next(iter(self._built)))
        return out

    def merge_pooling_params(self, params: Any = None) -> Any:
        params = super().merge_pooling_params(params)
        if getattr(params, "task", None) == "plugin":
            layouts = getattr(self._latest, "layouts", None) or {}
            params.extra_kwargs = {**(params.extra_kwargs or {}), LAYOUT_KEY: layouts}
        return params

    def forget(self, request_id: str | None) -> None:
        with self._built_lock:
            self._built.pop(request_id, None)

    def post_process(self, model_output: Sequence[Any], request_id: str | None = None, **kwargs):
        with self._built_lock:
            self._latest.response = self._built.pop(request_id, None)
        return super().post_process(model_output, request_id, **kwargs)

    # -- outputs -> response ---------------------------------------------------------------------

    def build_response(self, request: GLiNER2Request, outputs: Sequence[Any]) -> Any:
        built = getattr(self._latest, "response", None)  # set by post_process, same thread
        plan, readings = built if built is not None else (None, None)
        if plan is None:  # rebuilt when the cache lost it (same inputs, same result)
            plan = self.plan(request)
            readings = self.prompts(request, plan)
        budget = CandidateBudget(envs.get(envs.MAX_ENTITIES))
        options = Options(
            request.threshold, request.include_confidence, request.include_spans, budget
        )
        windowed = Options(request.threshold, True, True, budget)  # extract_long's windows
        scalar = set() if isinstance(request.schema_, dict) and is_build_form(request.schema_) else {
            name for name, meta in plan.entity_metadata.items() if meta.get("dtype", "list") != "list"
        }  # fmt: skip
        results, scores, at = [], 0, 0
        for index, reading in enumerate(readings):
            field = "data.text" if isinstance(request.text, str) else f"data.text[{index}]"
            decoded, items_seen = [], []
            for prompt in reading.prompts:
                items = self._items(prompt, outputs[at], field)
                at += 1
                found = self._extract(items, plan, prompt,
                                      options if reading.windows is None else windowed)  # fmt: skip
                confidence = request.include_confidence or reading.windows is not None
                decoded.append(to_json(format_results(found, plan, confidence)))
                items_seen.append(items)
            if reading.windows is None:
                result = decoded[0]
            else:
                result = merge_windows(
                    reading.document, reading.windows, decoded,
                    include_confidence=request.include_confidence,
                    include_spans=request.include_spans, scalar_entities=scalar,
                )  # fmt: skip
            if request.return_scores or request.return_windows:
                result = {"result": result}
            if request.return_scores:
                scores += sum(
                    0 if i.scores is None else i.scores.size for s in items_seen for i in s
                )
                budget_check("data.return_scores", scores, envs.get(envs.MAX_RETURNED_SCORES),
                             "scores", envs.MAX_RETURNED_SCORES.name,
                             "ask for scores with fewer texts")  # fmt: skip
                result["scores"] = [
                    {**_scores_json(item), **({} if reading.windows is None else {"window": w})}
                    for w, items in enumerate(items_seen)
                    for item in items
                ]
            if request.return_windows:
                result["windows"] = len(reading.prompts)
                result["truncated"] = reading.truncated
            results.append(result)
        return results[0] if isinstance(request.text, str) else results

    def _items(self, prompt: Prompt, output: Any, field: str) -> list:
        vector = output.outputs.data.float().cpu().numpy()
        try:
            if vector.size == 0:
                raise ValueError("the engine returned no scores")
            return split_output(vector, prompt, self.settings.max_width)
        except ValueError as error:  # its prompt reached the engine changed
            raise compat.validation_error(
                f"{field}: {error} (truncate_prompt_tokens and truncation_side do not apply "
                "to GLiNER2 requests)",
                field,
            ) from None

    @staticmethod
    def _extract(items: list, plan: SchemaPlan, prompt: Prompt, options: Options) -> dict:
        try:
            return extract(items, plan, prompt, options)
        except TooManyCandidates as error:
            limit = options.budget.limit if options.budget is not None else 0
            raise compat.validation_error(
                f"data.threshold: more than {limit} spans score above the request's "
                f"thresholds ({envs.MAX_ENTITIES.name}); raise them ({error.count} in one "
                "score grid)",
                "data.threshold",
            ) from None


def _scores_json(item: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"task": item.task.name, "kind": item.task.kind}
    if item.logits is not None:
        out["probs"] = None if item.probs is None else np.asarray(item.probs).tolist()
    else:
        out["count"] = item.count
        out["scores"] = None if item.scores is None else item.scores.tolist()
    return out
