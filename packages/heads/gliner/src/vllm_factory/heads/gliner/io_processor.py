"""gliner-exact NER pre/post-processing inside vLLM's API server, shared by every GLiNER model.

Request ``data``: see :class:`~vllm_factory.heads.gliner.request.GLiNERRequest`.
Response ``data``: one list of ``{"start", "end", "text", "label", "score"}`` per text (in
input order; character offsets into the text), or with ``return_scores`` one
``{"entities": [...], "scores": [[[...]]]}`` per text.

What crosses to the engine per prompt: its token ids, plus in ``PoolingParams.extra_kwargs``
a map from a digest of each prompt's ids to its word layout (first text token and sub-token
count per word, about one byte per word). Online, vLLM sends one ``PoolingParams`` for all
prompts of a request, which is why the layouts are keyed by prompt content. The engine sends
back the sigmoid score tensor ``[words, max_width, labels]``; thresholds and decoding are
applied here, so they cost the engine nothing.

Bi-encoder checkpoints: the prompt is the text's words alone, and the request's labels travel
as token ids of the checkpoint's label tokenizer (``LABELS_KEY``, one list for all prompts of
the request); the engine encodes each label once and caches its vector by those ids.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from transformers import AutoTokenizer
from vllm_factory.core import compat
from vllm_factory.core.io_processor import FactoryIOProcessor
from vllm_factory.core.stats import register_collector
from vllm_factory.heads.gliner.decoding import (
    checked_scores,
    decode_spans,
    span_filter,
    to_entities,
    word_spans,
)
from vllm_factory.heads.gliner.labels import LABELS_KEY, METRICS, STATS_NAME
from vllm_factory.heads.gliner.prep import LABELS_TOKENIZER_DIR
from vllm_factory.heads.gliner.prompts import (
    LAYOUT_KEY,
    WordLayout,
    layout_from_word_ids,
    prompt_key,
    prompt_words,
    split_words,
    unique_labels,
)
from vllm_factory.heads.gliner.request import UNI_ENCODER_MAX_LABELS, GLiNERRequest
from vllm_factory.heads.gliner.settings import GLiNERSettings, read_settings

logger = logging.getLogger(__name__)


def set_special_token_flags(tokenizer: Any) -> Any:
    """gliner asks for BOS/EOS only when the tokenizer defines them (spm-style tokenizers)."""
    if hasattr(tokenizer, "add_bos_token") and tokenizer.bos_token_id is not None:
        tokenizer.add_bos_token = True
    if hasattr(tokenizer, "add_eos_token") and tokenizer.eos_token_id is not None:
        tokenizer.add_eos_token = True
    return tokenizer


class GLiNERIOProcessor(FactoryIOProcessor[GLiNERRequest]):
    request_model = GLiNERRequest

    def setup(self) -> None:
        self.settings: GLiNERSettings = read_settings(self.checkpoint)
        self.tokenizer = set_special_token_flags(
            AutoTokenizer.from_pretrained(self.checkpoint.model, revision=self.checkpoint.revision)
        )
        if self.settings.bi_encoder:
            self.labels_tokenizer = self.load_labels_tokenizer()
            register_collector(STATS_NAME, METRICS)  # the engine's label cache on /metrics
        else:  # a uni-encoder's label prompt is built from its marker tokens
            for token in (self.settings.ent_token, self.settings.sep_token):
                if self.tokenizer.convert_tokens_to_ids(token) in (
                    None,
                    self.tokenizer.unk_token_id,
                ):
                    raise ValueError(
                        f"the tokenizer has no {token!r} token: not a GLiNER checkpoint"
                    )
        # gliner truncates at the tokenizer's model_max_length; vLLM cannot go past
        # --max-model-len, so that is a hard cap (only then do results differ from gliner).
        limit = int(self.tokenizer.model_max_length)
        self.token_limit = min(limit, self.max_model_len)
        if limit > self.max_model_len:
            logger.warning(
                "prompts are truncated at --max-model-len %d; gliner would keep up to %s "
                "tokens, so the longest inputs can score differently (raise --max-model-len)",
                self.max_model_len,
                limit,
            )
        self._latest = threading.local()  # pre_process -> merge_pooling_params, same thread

    def load_labels_tokenizer(self) -> Any:
        """A bi-encoder's label tokenizer: ``labels_tokenizer/`` as gliner saves it."""
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                self.checkpoint.model,
                subfolder=LABELS_TOKENIZER_DIR,
                revision=self.checkpoint.revision,
            )
        except (OSError, ValueError) as error:
            raise ValueError(
                f"{self.checkpoint.model} is a bi-encoder GLiNER without a readable "
                f"{LABELS_TOKENIZER_DIR}/ folder (gliner's save_pretrained writes one): {error}"
            ) from None
        # gliner truncates labels at the tokenizer's limit; the encoder cannot go past its
        # positions, so a longer label is refused instead (a 400 naming data.labels).
        limit = int(tokenizer.model_max_length)
        positions = (self.settings.labels_encoder_config or {}).get("max_position_embeddings")
        self.label_truncation = limit if limit < 1_000_000 else None
        self.label_token_limit = min(limit, int(positions)) if positions else limit
        return tokenizer

    # -- request -> prompts --------------------------------------------------------------------

    def encode_labels(self, labels: Sequence[str]) -> list[list[int]]:
        """A bi-encoder's label token ids, as gliner's label tokenizer call makes them."""
        truncate = self.label_truncation is not None
        encoded = self.labels_tokenizer(
            list(labels), truncation=truncate, max_length=self.label_truncation
        )["input_ids"]
        for label, ids in zip(labels, encoded):
            if len(ids) > self.label_token_limit:
                raise compat.validation_error(
                    f"data.labels: {label[:40]!r} is {len(ids)} label tokens; the label "
                    f"encoder takes at most {self.label_token_limit}",
                    "data.labels",
                )
        return [list(ids) for ids in encoded]

    def encode(
        self, text: str, labels: Sequence[str], max_len: int | None = None
    ) -> tuple[list[int], WordLayout]:
        """Token ids and word layout of one text, exactly as gliner builds them (a
        bi-encoder's prompt is the text's words alone); ``max_len`` words at most (default:
        the checkpoint's)."""
        words = [w.text for w in split_words(text, max_len or self.settings.max_len)]
        prompt = (
            []
            if self.settings.bi_encoder
            else prompt_words(labels, self.settings.ent_token, self.settings.sep_token)
        )
        encoding = self.tokenizer(
            prompt + words, is_split_into_words=True, truncation=True, max_length=self.token_limit
        )
        layout = layout_from_word_ids(encoding.word_ids(), len(prompt), len(words))
        return list(encoding["input_ids"]), layout

    def build_prompts(self, request: GLiNERRequest) -> list[list[int]]:
        problem = request.input_span_problem()
        if problem is not None:
            raise compat.validation_error(problem, "data.input_spans")
        labels = unique_labels(request.labels)
        label_ids = None
        if self.settings.bi_encoder:
            label_ids = self.encode_labels(labels)
        else:
            if len(request.labels) > UNI_ENCODER_MAX_LABELS:
                raise compat.validation_error(
                    f"data.labels: at most {UNI_ENCODER_MAX_LABELS} labels for a uni-encoder "
                    f"GLiNER (its labels share the prompt with the text), got "
                    f"{len(request.labels)}",
                    "data.labels",
                )
            for label in labels:
                for token in (self.settings.ent_token, self.settings.sep_token):
                    if token in label:
                        raise compat.validation_error(
                            f"data.labels: labels must not contain {token!r}", "data.labels"
                        )
        prompts, layouts = [], {}
        for text in request.texts:
            ids, layout = self.encode(text, labels, request.max_len)
            if not any(layout.counts):
                raise compat.validation_error(
                    f"data.labels: the label prompt fills all {self.token_limit} tokens; "
                    "send fewer or shorter labels",
                    "data.labels",
                )
            prompts.append(ids)
            layouts[prompt_key(ids)] = layout.to_wire()
        self._latest.layouts = layouts
        self._latest.label_ids = label_ids
        return prompts

    def merge_pooling_params(self, params: Any = None) -> Any:
        params = super().merge_pooling_params(params)
        if getattr(params, "task", None) == "plugin":
            layouts = getattr(self._latest, "layouts", None) or {}
            extra = {**(params.extra_kwargs or {}), LAYOUT_KEY: layouts}
            label_ids = getattr(self._latest, "label_ids", None)
            if label_ids is not None:  # bi-encoder: one label list for all prompts
                extra[LABELS_KEY] = label_ids
            params.extra_kwargs = extra
        return params

    # -- outputs -> response ---------------------------------------------------------------------

    def build_response(self, request: GLiNERRequest, outputs: Sequence[Any]) -> list:
        labels = unique_labels(request.labels)
        results = []
        for index, (text, output) in enumerate(zip(request.texts, outputs)):
            words = split_words(text, request.max_len or self.settings.max_len)
            scores = checked_scores(output.outputs.data.float().cpu(), len(words), index)
            allowed = None
            if request.input_spans is not None and request.input_spans[index] is not None:
                chars = [(span.start, span.end) for span in request.input_spans[index]]
                allowed = span_filter(word_spans(chars, words), len(words), scores.shape[1])
            spans = decode_spans(
                scores,
                len(words),
                request.threshold,
                request.flat_ner,
                request.multi_label,
                allowed,
            )
            probs = scores if request.return_class_probs else None
            entities = to_entities(spans, words, labels, text, probs)
            if request.return_scores:
                results.append({"entities": entities, "scores": scores.tolist()})
            else:
                results.append(entities)
        return results
