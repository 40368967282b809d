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
from transformers import AutoTokenizer
from vllm_factory.core import compat
from vllm_factory.core.io_processor import FactoryIOProcessor
from vllm_factory.heads.gliner.prompts import prompt_key
from vllm_factory.models.gliner2 import ARCHITECTURE
from vllm_factory.models.gliner2.decoding import (
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
        self.tokenizer = AutoTokenizer.from_pretrained(
            self.checkpoint.model, revision=self.checkpoint.revision
        )
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
        out = []
        for index, text in enumerate(request.texts):
            words = split_words(text, request.max_len)
            prompt = build_prompt(
                tasks,
                prefix,
                words,
                lambda item: list(self.tokenize(item)),
                self.tokenizer.convert_tokens_to_ids,
            )
            if len(prompt.token_ids) > self.max_model_len:
                field = "data.text" if isinstance(request.text, str) else f"data.text[{index}]"
                raise compat.validation_error(
                    f"{field}: schema and text take {len(prompt.token_ids)} tokens, more than "
                    f"the server's limit of {self.max_model_len} (--max-model-len); send a "
                    "shorter text, set max_len, or split it",
                    field,
                )
            out.append(prompt)
        return out

    def build_prompts(self, request: GLiNER2Request) -> list[list[int]]:
        plan = self.plan(request)
        prompts = self.prompts(request, plan)
        self._latest.layouts = {prompt_key(p.token_ids): p.layout.to_wire() for p in prompts}
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
        options = Options(request.threshold, request.include_confidence, request.include_spans)
        results = []
        for index, (prompt, output) in enumerate(zip(prompts, outputs)):
            vector = output.outputs.data.float().cpu().numpy()
            if vector.size == 0:
                raise RuntimeError(f"text {index}: the engine returned no GLiNER2 scores")
            items = split_output(vector, prompt, self.settings.max_width)
            result = to_json(format_results(extract(items, plan, prompt, options), plan,
                                            request.include_confidence))  # fmt: skip
            if request.return_scores:
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
