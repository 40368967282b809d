"""``deberta_gliner2_io``: GLiNER2 request handling inside vLLM's API server.

Request ``data``: see :class:`~vllm_factory.models.gliner2.request.GLiNER2Request`.
Response ``data``: per text (a list when ``text`` is a list), the dictionary
``GLiNER2.extract`` returns for the same schema and options; with ``return_scores`` it is
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
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from vllm_factory.core import compat, envs
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
    build_prompt,
    choice_prefix,
    split_words,
    tasks_of,
)
from vllm_factory.models.gliner2.request import GLiNER2Request
from vllm_factory.models.gliner2.schema import SchemaError, SchemaPlan
from vllm_factory.models.gliner2.settings import GLiNER2Settings, read_settings

logger = logging.getLogger(__name__)
TOKENIZE_CACHE = 65536


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
        self.tokenize = lru_cache(maxsize=TOKENIZE_CACHE)(self._tokenize)
        self._latest = threading.local()  # pre_process -> merge_pooling_params, same thread
        # The last plans and prompts per request id, for build_response.
        self._built: dict[str | None, tuple[SchemaPlan, list[Prompt]]] = {}
        self._built_lock = threading.Lock()

    def _tokenize(self, item: str) -> tuple[str, ...]:
        return tuple(self.tokenizer.tokenize(item))

    # -- request -> prompts --------------------------------------------------------------------

    def plan(self, request: GLiNER2Request) -> SchemaPlan:
        try:
            return request.plan()
        except SchemaError as error:
            raise compat.validation_error(str(error), error.field) from None

    def prompts(self, request: GLiNER2Request, plan: SchemaPlan) -> list[Prompt]:
        tasks, prefix = tasks_of(plan), choice_prefix(plan)
        # Every word takes a token: a text of more words than the server's limit never fits,
        # whatever its tokens, so no more than that many are read.
        cap = self.max_model_len + 1
        limit = cap if request.max_len is None else min(request.max_len, cap)
        texts = [split_words(text, limit) for text in request.texts]
        chars = sum(words.ends[-1] for words in texts if words.ends)
        budget_check("data.text", chars, envs.get(envs.MAX_REQUEST_CHARS),
                     "characters (as far as each text is read)", envs.MAX_REQUEST_CHARS.name,
                     "send the texts in several requests")  # fmt: skip
        out = []
        for index, words in enumerate(texts):
            field = "data.text" if isinstance(request.text, str) else f"data.text[{index}]"
            if len(words.tokens) >= cap:
                raise self.too_long(field, f"more than {self.max_model_len} words")
            prompt = build_prompt(
                tasks,
                prefix,
                words,
                lambda item: list(self.tokenize(item)),
                self.tokenizer.convert_tokens_to_ids,
            )
            if len(prompt.token_ids) > self.max_model_len:
                raise self.too_long(field, f"schema and text take {len(prompt.token_ids)} tokens")
            out.append(prompt)
        return out

    def too_long(self, field: str, what: str) -> Exception:
        return compat.validation_error(
            f"{field}: {what}, more than the server's limit of {self.max_model_len} tokens "
            "(--max-model-len); send a shorter text, set max_len, or split it",
            field,
        )

    def build_prompts(self, request: GLiNER2Request) -> list[list[int]]:
        plan = self.plan(request)
        prompts = self.prompts(request, plan)
        layouts = {prompt_key(p.token_ids): p.layout.to_wire() for p in prompts}
        size = sum(len(wire) for wire in layouts.values()) * len(prompts)
        budget_check("data.text", size, envs.get(envs.MAX_PROMPT_DATA_BYTES),
                     "bytes of word layouts sent with each of its prompts",
                     envs.MAX_PROMPT_DATA_BYTES.name, "send fewer texts per request")  # fmt: skip
        self._latest.layouts = layouts
        self._latest.built = (plan, prompts)
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
        plan, prompts = built if built is not None else (None, None)
        if plan is None:  # rebuilt when the cache lost it (same inputs, same result)
            plan = self.plan(request)
            prompts = self.prompts(request, plan)
        budget = CandidateBudget(envs.get(envs.MAX_ENTITIES))
        options = Options(
            request.threshold, request.include_confidence, request.include_spans, budget
        )
        results, scores = [], 0
        for index, (prompt, output) in enumerate(zip(prompts, outputs)):
            field = "data.text" if isinstance(request.text, str) else f"data.text[{index}]"
            vector = output.outputs.data.float().cpu().numpy()
            try:
                if vector.size == 0:
                    raise ValueError("the engine returned no scores")
                items = split_output(vector, prompt, self.settings.max_width)
            except ValueError as error:  # its prompt reached the engine changed
                raise compat.validation_error(
                    f"{field}: {error} (truncate_prompt_tokens and truncation_side do not apply "
                    "to GLiNER2 requests)",
                    field,
                ) from None
            try:
                found = extract(items, plan, prompt, options)
            except TooManyCandidates as error:
                raise compat.validation_error(
                    f"data.threshold: more than {budget.limit} spans score above the request's "
                    f"thresholds ({envs.MAX_ENTITIES.name}); raise them ({error.count} in one "
                    "score grid)",
                    "data.threshold",
                ) from None
            result = to_json(format_results(found, plan, request.include_confidence))
            if request.return_scores:
                scores += sum(0 if i.scores is None else i.scores.size for i in items)
                budget_check("data.return_scores", scores, envs.get(envs.MAX_RETURNED_SCORES),
                             "scores", envs.MAX_RETURNED_SCORES.name,
                             "ask for scores with fewer texts")  # fmt: skip
                result = {"result": result, "scores": [_scores_json(item) for item in items]}
            results.append(result)
        return results[0] if isinstance(request.text, str) else results


def _scores_json(item: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"task": item.task.name, "kind": item.task.kind}
    if item.logits is not None:
        out["probs"] = None if item.probs is None else np.asarray(item.probs).tolist()
    else:
        out["count"] = item.count
        out["scores"] = None if item.scores is None else item.scores.tolist()
    return out
