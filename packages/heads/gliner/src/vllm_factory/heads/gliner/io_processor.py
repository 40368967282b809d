"""gliner-exact NER pre/post-processing inside vLLM's API server, shared by every GLiNER model.

Request ``data``: see :class:`~vllm_factory.heads.gliner.request.GLiNERRequest`.
Response ``data``: for one text (``"text": "..."``), its list of ``{"start", "end", "text",
"label", "score"}`` (character offsets into the text), or with ``return_scores`` its
``{"entities": [...], "scores": [[[...]]]}``; for a list of texts, one such result per text,
in input order.

What crosses to the engine per prompt: its token ids, plus in ``PoolingParams.extra_kwargs``
a map from a digest of each prompt's ids to its word layout (first text token and sub-token
count per word, four bytes per word). Online, vLLM sends one ``PoolingParams`` for all
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

import torch
from vllm_factory.core import compat, envs
from vllm_factory.core.io_processor import FactoryIOProcessor, budget_check
from vllm_factory.heads.gliner.decoding import (
    TooManyCandidates,
    UnscoredText,
    checked_scores,
    decode_spans,
    span_filter,
    to_entities,
    word_spans,
)
from vllm_factory.heads.gliner.labels import LABELS_KEY, METRICS, STATS_NAME
from vllm_factory.heads.gliner.linking import (
    LabelPlan,
    LabelTooLong,
    candidate_labels,
    chunked,
    link,
    link_spans,
    merge_chunks,
    template_problem,
)
from vllm_factory.heads.gliner.prep import LABELS_TOKENIZER_DIR
from vllm_factory.heads.gliner.prompts import (
    LAYOUT_KEY,
    TextWords,
    WordLayout,
    prompt_key,
    prompt_words,
    unique_labels,
)
from vllm_factory.heads.gliner.relex import (
    MAX_RELATION_ENTITIES,
    RELEX_KEY,
    decode_relations,
    unpack,
)
from vllm_factory.heads.gliner.request import (
    MAX_CHARS_PER_LABEL,
    MAX_PROMPTS_PER_REQUEST,
    UNI_ENCODER_MAX_LABELS,
    GLiNERRequest,
)
from vllm_factory.heads.gliner.settings import GLiNERSettings, read_settings
from vllm_factory.heads.gliner.stats import observe_windows, register_collector
from vllm_factory.heads.gliner.token_level import decode_tokens, merge_word_scores
from vllm_factory.heads.gliner.windows import (
    TextWindows,
    default_overlap,
    max_overlap,
    merge_scores,
    split_text,
    words_within,
)
from vllm_factory.heads.gliner.word_tokens import WordTokenizer

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
    selected_by = "--config-format gliner"

    def setup(self) -> None:
        self.settings: GLiNERSettings = read_settings(self.checkpoint)
        self.tokenizer = set_special_token_flags(self.checkpoint.tokenizer())
        if self.settings.bi_encoder:
            self.labels_tokenizer = self.load_labels_tokenizer()
            register_collector(STATS_NAME, METRICS)  # the engine's label cache on /metrics
        else:  # a uni-encoder's label prompt is built from its marker tokens
            for token in self.marker_tokens():
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
        self.word_tokenizer = WordTokenizer(self.tokenizer, self.token_limit)
        self._latest = threading.local()  # pre_process -> merge_pooling_params, same thread

    def marker_tokens(self) -> tuple[str, ...]:
        """The tokens a uni-encoder's label prompt is built of (a relex checkpoint's relation
        marker too): labels must not contain them."""
        settings = self.settings
        extra = (settings.rel_token,) if settings.relex else ()
        return (settings.ent_token, settings.sep_token, *extra)

    def label_prompt(self, labels: Sequence[str], relations: Sequence[str] | None) -> list[str]:
        """A uni-encoder's label prompt words; a relex checkpoint's (gliner's relex processor)
        also lists the relation labels after the entity labels, each after its marker, with
        a second separator, whether or not the request asks for relations."""
        settings = self.settings
        words = prompt_words(labels, settings.ent_token, settings.sep_token)
        if settings.relex:
            for relation in relations or ():
                words += [settings.rel_token, relation]
            words.append(settings.sep_token)
        return words

    @staticmethod
    def relation_labels(request: GLiNERRequest) -> list[str] | None:
        """The request's relation labels, first occurrences in order (gliner's mapping)."""
        return None if request.relations is None else unique_labels(request.relations)

    def load_labels_tokenizer(self) -> Any:
        """A bi-encoder's label tokenizer: ``labels_tokenizer/`` as gliner saves it."""
        try:
            tokenizer = self.checkpoint.tokenizer(subfolder=LABELS_TOKENIZER_DIR)
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

    def encode_labels(self, labels: Sequence[str], field: str = "data.labels") -> list[list[int]]:
        """A bi-encoder's label token ids, as gliner's label tokenizer call makes them."""
        truncate = self.label_truncation is not None
        encoded = self.labels_tokenizer(
            list(labels), truncation=truncate, max_length=self.label_truncation
        )["input_ids"]
        for label, ids in zip(labels, encoded):
            if len(ids) > self.label_token_limit:
                raise compat.validation_error(
                    f"{field}: {label[:40]!r} is {len(ids)} label tokens; the label "
                    f"encoder takes at most {self.label_token_limit}",
                    field,
                )
        return [list(ids) for ids in encoded]

    def encode(
        self,
        text_words: TextWords,
        labels: Sequence[str],
        relations: Sequence[str] | None = None,
    ) -> tuple[list[int], WordLayout]:
        """Token ids and word layout of one text's words (:meth:`text_words`), exactly as
        gliner builds them (a bi-encoder's prompt is the text's words alone)."""
        words = text_words.texts
        prompt = [] if self.settings.bi_encoder else self.label_prompt(labels, relations)
        return self.word_tokenizer.prompt(prompt + words, len(prompt))

    def text_words(self, request: GLiNERRequest, index: int) -> TextWords:
        """Text ``index``'s words as its entities are mapped to (gliner's splitter; all of
        them when read in windows, else at most the request's or the checkpoint's
        ``max_len``)."""
        return self.text_windows(request)[index].words

    def text_windows(self, request: GLiNERRequest) -> list[TextWindows]:
        """Each text's words and windows (:mod:`~vllm_factory.heads.gliner.windows`), split
        once per request and kept with it for its response; a 400 for a text too long for
        ``long_text`` ``"error"``, a bad ``window_overlap`` or too many windows."""
        if request._words is None:
            request._words = self._split_texts(request)
        return request._words

    def token_room(self, request: GLiNERRequest) -> int | None:
        """Tokens a prompt leaves to the text's words: the token limit less the special tokens
        and, for a uni-encoder, the longest label-chunk prompt of the request. None (no token
        bound: words only) when the label prompt leaves none; the prompts are then refused,
        naming the labels, after the request's budgets are checked."""
        if self.settings.bi_encoder:
            return self.token_limit - self.word_tokenizer.special_tokens()
        plan = self.label_plan(request)
        # the label prompts are tokenized here: their characters are bounded first
        field = "data.labels" if request.candidates is None else "data.candidates"
        relations = self.relation_labels(request) or []
        budget_check(field, sum(len(label) for label in [*plan.labels, *relations]),
                     envs.get(envs.MAX_REQUEST_CHARS), "characters to tokenize at least",
                     envs.MAX_REQUEST_CHARS.name, "send fewer or shorter labels")  # fmt: skip
        longest = max(
            self.word_tokenizer.prompt_length(self.label_prompt(chunk, relations))
            for chunk in plan.chunks
        )
        room = self.token_limit - longest
        return room if room > 0 else None

    def _split_texts(self, request: GLiNERRequest) -> list[TextWindows]:
        max_len = request.max_len or self.settings.max_len
        mode = request.long_text or envs.get(envs.LONG_TEXT)
        if request.relations is not None:  # relations are read as gliner reads them
            if request.long_text == "window":
                raise compat.validation_error(
                    "data.long_text: relations are extracted from one window per text; send "
                    "'truncate' (the default with data.relations, as gliner reads it) or "
                    "'error'",
                    "data.long_text",
                )
            mode = request.long_text or "truncate"
        overlap = request.window_overlap
        if overlap is None:
            overlap = default_overlap(max_len)
        elif overlap > max_overlap(max_len):
            raise compat.validation_error(
                f"data.window_overlap: at most half of max_len ({max_len} words): "
                f"{max_overlap(max_len)}, got {overlap}",
                "data.window_overlap",
            )
        texts = request.texts
        if mode == "window":  # every word is tokenized: refused before counting tokens
            budget_check("data.text", sum(len(text.strip()) for text in texts),
                         envs.get(envs.MAX_REQUEST_CHARS), "characters to tokenize at least",
                         envs.MAX_REQUEST_CHARS.name,
                         "send fewer or shorter texts")  # fmt: skip
        room = self.token_room(request)
        count = self.word_tokenizer.word_counts
        limit = envs.get(envs.MAX_WINDOWS)
        found: list[TextWindows] = []
        used = 0
        for index, text in enumerate(texts):
            # a text may use the windows the later texts (one each at least) leave to it
            left = max(1, limit - used - (len(texts) - index - 1))
            max_words = words_within(left, max_len, overlap)
            windows = split_text(text, max_len, mode, overlap, max_words, count, room, left + 1)
            if mode == "error" and windows.truncated:
                field = "data.text" if isinstance(request.text, str) else f"data.text[{index}]"
                raise compat.validation_error(
                    f"{field}: more than max_len ({max_len}) words, or more tokens than a "
                    f"prompt leaves to the text ({room}), and data.long_text is 'error'; send "
                    "data.long_text 'window' (read it whole) or 'truncate'",
                    field,
                )
            used += len(windows.bounds)
            # more windows than left (and so for more words than they can cover): counted up
            # to the first window too many, at least
            if len(windows.bounds) > left:
                used += len(texts) - index - 1
                break
            found.append(windows)
        if mode == "window":
            budget_check("data.text", used, limit,
                         "text windows" + (" at least" if len(found) < len(texts) else ""),
                         envs.MAX_WINDOWS.name, "send fewer or shorter texts, or "
                         "data.long_text 'truncate'")  # fmt: skip
        return found

    def label_plan(self, request: GLiNERRequest) -> LabelPlan:
        """The request's labels and how they are scored: one chunk of ``labels``, or the
        candidates' labels (``template``) in chunks of ``max_labels``. Made once per request
        (when its prompts are built) and kept with it for its response."""
        if request._plan is None:
            request._plan = self._make_label_plan(request)
        return request._plan

    def _make_label_plan(self, request: GLiNERRequest) -> LabelPlan:
        if request.candidate_labels is not None:  # vLLM Factory 0.2's linking form
            types = unique_labels(request.labels or ())
            links = unique_labels(request.candidate_labels)
            size = len(links) if self.settings.bi_encoder else UNI_ENCODER_MAX_LABELS
            chunks = [types, *chunked(links, size)]
            return LabelPlan(types + links, chunks, links_spans=True)
        if request.candidates is None:
            labels = unique_labels(request.labels or ())
            return LabelPlan(labels, [labels])
        problem = template_problem(request.template, MAX_CHARS_PER_LABEL)
        if problem is not None:
            raise compat.validation_error(problem, "data.template")
        candidates = [c.model_dump(exclude_none=True) for c in request.candidates]
        try:
            labels, owner = candidate_labels(candidates, request.template, MAX_CHARS_PER_LABEL)
        except LabelTooLong as error:
            field = f"data.candidates[{error.index}]"
            raise compat.validation_error(
                f"{field}: its label from data.template would be {error.length} characters; at "
                f"most {MAX_CHARS_PER_LABEL}",
                field,
            ) from None
        for label, index in owner.items():
            if not label.strip() or len(label) > MAX_CHARS_PER_LABEL:
                raise compat.validation_error(
                    f"data.candidates[{index}]: its label from data.template must be 1 to "
                    f"{MAX_CHARS_PER_LABEL} characters, not blank; got {len(label)}",
                    f"data.candidates[{index}]",
                )
        return LabelPlan(labels, chunked(labels, request.max_labels), candidates, owner)

    def build_prompts(self, request: GLiNERRequest) -> list[list[int]]:
        problem = request.labels_problem()
        if problem is not None:
            raise compat.validation_error(problem[1], problem[0])
        problem = request.input_span_problem()
        if problem is not None:
            raise compat.validation_error(problem, "data.input_spans")
        if self.settings.token_level:
            self.check_token_level(request)
        relations = self.relation_labels(request)
        if relations is not None and not self.settings.relex:
            raise compat.validation_error(
                "data.relations: this checkpoint has no relation head (serve a relex GLiNER "
                "checkpoint, gliner's UniEncoderSpanRelexGLiNER, for relations)",
                "data.relations",
            )
        plan = self.label_plan(request)
        field = "data.labels" if request.candidates is None else "data.candidates"
        label_ids = None
        if self.settings.bi_encoder:
            label_ids = self.encode_labels(plan.labels, field)
            chunks = [plan.labels]  # every label scored on its own: chunks split the scores
        else:
            chunks = plan.chunks
            count = len(request.labels) if request.candidates is None else len(chunks[0])
            if relations is not None and count + len(relations) > UNI_ENCODER_MAX_LABELS:
                raise compat.validation_error(
                    f"data.relations: at most {UNI_ENCODER_MAX_LABELS} entity and relation "
                    f"labels together (they share the prompt with the text), got "
                    f"{count} + {len(relations)}",
                    "data.relations",
                )
            if count > UNI_ENCODER_MAX_LABELS:
                raise compat.validation_error(
                    f"{field}: at most {UNI_ENCODER_MAX_LABELS} labels for a uni-encoder "
                    f"GLiNER (its labels share the prompt with the text), got {count}"
                    + ("; send data.max_labels to score them in chunks" if field != "data.labels"
                       else ""),
                    field,
                )  # fmt: skip
            windows = sum(len(text.bounds) for text in self.text_windows(request))
            if len(chunks) * windows > MAX_PROMPTS_PER_REQUEST:
                by = "data.candidate_labels" if plan.links_spans else "data.max_labels"
                inputs = (f"{len(request.texts)} texts" if windows == len(request.texts)
                          else f"{windows} text windows")  # fmt: skip
                raise compat.validation_error(
                    f"{by}: {len(chunks)} label chunks x {inputs} is "
                    f"over {MAX_PROMPTS_PER_REQUEST} model inputs per request",
                    by,
                )
            for where, group in ((field, plan.labels), ("data.relations", relations or ())):
                for label in group:
                    for token in self.marker_tokens():
                        if token in label:
                            raise compat.validation_error(
                                f"{where}: labels must not contain {token!r}", where
                            )
        self.check_budget(request, plan, chunks)
        prompts, layouts = [], {}
        windows = [words for text in self.text_windows(request) for words in text.window_words()]
        for words in windows:
            for number, chunk in enumerate(chunks):
                ids, layout = self.encode(words, chunk, relations)
                if not any(layout.counts):
                    where = "data.candidate_labels" if plan.links_spans and number else field
                    raise compat.validation_error(
                        f"{where}: the label prompt fills all {self.token_limit} tokens; "
                        "send fewer or shorter labels",
                        where,
                    )
                prompts.append(ids)
                layouts[prompt_key(ids)] = layout.to_wire()
        size = sum(len(wire) for wire in layouts.values())
        size += 4 * sum(len(ids) for ids in label_ids or ())
        budget_check("data.text", size * len(prompts), envs.get(envs.MAX_PROMPT_DATA_BYTES),
                     "bytes of word layouts and label ids sent with each of its prompts",
                     envs.MAX_PROMPT_DATA_BYTES.name, "send fewer texts or labels per "
                     "request")  # fmt: skip
        self._latest.layouts = layouts
        self._latest.label_ids = label_ids
        self._latest.relex = None
        if relations is not None:  # the engine pairs entities with these thresholds
            adjacency = request.adjacency_threshold
            self._latest.relex = [
                request.threshold,
                request.threshold if adjacency is None else adjacency,
            ]
        texts = self.text_windows(request)
        observe_windows([len(text.bounds) for text in texts], sum(t.truncated for t in texts))
        return prompts

    @staticmethod
    def check_token_level(request: GLiNERRequest) -> None:
        """A token-level checkpoint scores words, not spans: what needs a span's score per
        label (``class_probs``, entity linking) is refused, naming the field."""
        for field, asked in (
            ("return_class_probs", request.return_class_probs),
            ("candidates", request.candidates is not None),
            ("candidate_labels", request.candidate_labels is not None),
        ):
            if asked:
                raise compat.validation_error(
                    f"data.{field}: not available for a token-level GLiNER checkpoint "
                    "(span_mode 'token_level' scores words, not spans per label)",
                    f"data.{field}",
                )

    def check_budget(self, request: GLiNERRequest, plan: LabelPlan, chunks: list) -> None:
        """Refuse, before any tokenizing, a request over the server's budgets: the characters
        tokenized (each prompt's words and labels), the span x label cells the model scores
        and sends back, and the scores ``return_scores`` would answer."""
        label_chars = sum(len(label) for label in plan.labels)
        text_chars, words, spans = 0, 0, 0
        width = self.settings.max_width
        token_level = self.settings.token_level
        windows = 0
        for text in self.text_windows(request):
            for first, end in text.bounds:  # overlapping words count once per window
                windows += 1
                words += end - first
                # a token-level span may run over the whole window
                spans += spans_inside(end - first, end - first if token_level else width)
                if end > first:
                    start, stop = text.words.bounds(first, end - 1)
                    text_chars += stop - start
        # a uni-encoder tokenizes each window once per label chunk, with that chunk's labels
        text_chars *= len(chunks)
        label_chars *= 1 if self.settings.bi_encoder else windows
        labels_field = "data.labels" if request.candidates is None else "data.candidates"
        checks = [
            ("data.text" if text_chars >= label_chars else labels_field,
             text_chars + label_chars, envs.MAX_REQUEST_CHARS, "characters to tokenize",
             "send fewer or shorter texts or labels"),
            ("data.text", words * (3 if token_level else width) * len(plan.labels),
             envs.GLINER_MAX_CELLS, "span x label cells", "send fewer texts, words or labels"),
        ]  # fmt: skip
        relations = self.relation_labels(request)
        if relations is not None:  # entity pairs x relation labels, at most, per window
            paired = [
                min(MAX_RELATION_ENTITIES, spans_inside(end - first, width))
                for text in self.text_windows(request)
                for first, end in text.bounds
            ]
            checks.append(("data.relations", sum(n * (n - 1) for n in paired) * len(relations),
                           envs.GLINER_MAX_CELLS, "entity pair x relation cells at most",
                           "send fewer texts, words or relations"))  # fmt: skip
        if request.return_scores:
            checks.append(("data.return_scores", checks[1][1], envs.MAX_RETURNED_SCORES,
                           "scores", "ask for scores with fewer texts or labels"))  # fmt: skip
        if request.threshold == 0 and request.input_spans is None:
            # every score is above 0: known before the model runs, refused before it does
            checks.append(("data.threshold", spans * len(plan.labels), envs.MAX_ENTITIES,
                           "spans above a threshold of 0 (every span x label)",
                           "raise the threshold"))  # fmt: skip
        for field, amount, setting, unit, advice in checks:
            budget_check(field, amount, envs.get(setting), unit, setting.name, advice)

    def merge_pooling_params(self, params: Any = None) -> Any:
        params = super().merge_pooling_params(params)
        if getattr(params, "task", None) == "plugin":
            layouts = getattr(self._latest, "layouts", None) or {}
            extra = {**(params.extra_kwargs or {}), LAYOUT_KEY: layouts}
            label_ids = getattr(self._latest, "label_ids", None)
            if label_ids is not None:  # bi-encoder: one label list for all prompts
                extra[LABELS_KEY] = label_ids
            relex = getattr(self._latest, "relex", None)
            if relex is not None:  # relex checkpoint, relations asked for: the thresholds
                extra[RELEX_KEY] = relex
            params.extra_kwargs = extra
        return params

    # -- outputs -> response ---------------------------------------------------------------------

    def prompts_per_window(self, plan: LabelPlan) -> int:
        """A uni-encoder's label chunks are prompts of their own; a bi-encoder's are one."""
        return 1 if self.settings.bi_encoder else len(plan.chunks)

    def chunk_scores(
        self, plan: LabelPlan, outputs: Sequence[Any], first: int, num_words: int, index: int
    ) -> list[torch.Tensor]:
        """The score tensor per label chunk of the window (of text ``index``) whose prompts
        start at ``outputs[first]``: a uni-encoder's chunks are prompts of their own; a
        bi-encoder scored all labels in one prompt (sliced here)."""
        if not self.settings.bi_encoder:
            return [
                checked_scores(output.outputs.data.float().cpu(), num_words, index)
                for output in outputs[first : first + len(plan.chunks)]
            ]
        scores = checked_scores(outputs[first].outputs.data.float().cpu(), num_words, index)
        parts, offset = [], 0
        for chunk in plan.chunks:
            parts.append(scores[:, :, offset : offset + len(chunk)])
            offset += len(chunk)
        return parts

    def build_response(self, request: GLiNERRequest, outputs: Sequence[Any]) -> list | dict:
        if request.relations is not None:
            return self.relex_response(request, outputs)
        plan = self.label_plan(request)
        linking = plan.candidates is not None
        results = []
        candidates_left = envs.get(envs.MAX_ENTITIES)
        step, prompt = self.prompts_per_window(plan), 0
        for index, (text, windows) in enumerate(zip(request.texts, self.text_windows(request))):
            words = windows.words
            per_window = []
            try:
                for first, end in windows.bounds:
                    per_window.append(self.chunk_scores(plan, outputs, prompt, end - first, index))
                    prompt += step
            except UnscoredText as error:  # the prompt changed after pre-processing
                field = "data.text" if isinstance(request.text, str) else f"data.text[{index}]"
                raise compat.validation_error(str(error), field) from None
            merge = merge_word_scores if self.settings.token_level else merge_scores
            per_chunk = [
                merge(list(parts), windows.bounds, len(words)) for parts in zip(*per_window)
            ]
            allowed = None
            if request.input_spans is not None and request.input_spans[index] is not None:
                chars = [(span.start, span.end) for span in request.input_spans[index]]
                allowed = word_spans(chars, words)
            found = []
            for chunk, scores in zip(plan.decoded_chunks, per_chunk):
                try:
                    spans = self.decode(request, scores, len(words), allowed, candidates_left)
                except TooManyCandidates as error:
                    limit = envs.get(envs.MAX_ENTITIES)
                    seen = limit - candidates_left + error.count
                    raise compat.validation_error(
                        f"data.threshold: at least {seen} spans score above "
                        f"{request.threshold}, more than the server keeps per request "
                        f"({envs.MAX_ENTITIES.name}={limit}); raise the threshold",
                        "data.threshold",
                    ) from None
                candidates_left -= spans.candidates
                probs = scores if request.return_class_probs or linking else None
                found.append(to_entities(spans, words, chunk, text, probs))
            if plan.links_spans:
                candidates = torch.cat(per_chunk[1:], 2).numpy()
                rows = [candidates[s.start, s.end - s.start] for s in spans]
                entities = link_spans(found[0], rows, plan.labels[len(plan.chunks[0]) :],
                                      request.threshold)  # fmt: skip
            elif linking:
                merged = merge_chunks(
                    found, request.threshold, rerank=request.max_labels is not None
                )
                entities = link(merged, plan.candidates, plan.owner)
            else:
                entities = found[0]
            if request.return_scores or request.return_windows:
                result: dict[str, Any] = {"entities": entities}
                if request.return_windows:
                    result["windows"] = len(windows.bounds)
                    result["truncated"] = windows.truncated
                if request.return_scores:
                    result["scores"] = torch.cat(per_chunk, 2).tolist()
                results.append(result)
            else:
                results.append(entities)
        # One text (vLLM Factory 0.2's form): its entities; a list of texts: one result per text.
        return results[0] if isinstance(request.text, str) else results

    def relex_response(self, request: GLiNERRequest, outputs: Sequence[Any]) -> list | dict:
        """Entities and relations per text (one prompt each: one window, one label chunk),
        as gliner's ``predict_relations`` returns them."""
        plan = self.label_plan(request)
        labels = plan.labels
        relation_labels = self.relation_labels(request) or []
        relation_threshold = request.relation_threshold
        if relation_threshold is None:
            relation_threshold = request.threshold
        candidates_left = envs.get(envs.MAX_ENTITIES)
        width = self.settings.max_width
        results = []
        for index, (text, windows) in enumerate(zip(request.texts, self.text_windows(request))):
            words = windows.words
            field = "data.text" if isinstance(request.text, str) else f"data.text[{index}]"
            first, end = windows.bounds[0]
            data = outputs[index].outputs.data
            parts = unpack(data, end - first, width, len(labels), len(relation_labels))
            if parts is None:
                raise compat.validation_error(
                    f"{field}: the engine returned no relation scores for this text (its prompt "
                    "reached the engine changed, or without the request's thresholds)",
                    field,
                )
            if parts.overflow:
                raise compat.validation_error(
                    f"data.threshold: {parts.overflow} spans of {field} score above "
                    f"{request.threshold}; relations pair at most {MAX_RELATION_ENTITIES} "
                    "per text: raise the threshold",
                    "data.threshold",
                )
            scores = checked_scores(parts.scores, end - first, index)
            allowed = None
            if request.input_spans is not None and request.input_spans[index] is not None:
                chars = [(span.start, span.end) for span in request.input_spans[index]]
                allowed = word_spans(chars, words)
            try:
                spans = self.decode(request, scores, len(words), allowed, candidates_left)
            except TooManyCandidates as error:
                raise compat.validation_error(
                    f"data.threshold: at least {error.count} spans score above "
                    f"{request.threshold}, more than the server keeps per request "
                    f"({envs.MAX_ENTITIES.name}={envs.get(envs.MAX_ENTITIES)}); raise the "
                    "threshold",
                    "data.threshold",
                ) from None
            candidates_left -= spans.candidates
            probs = scores if request.return_class_probs else None
            entities = to_entities(spans, words, labels, text, probs)
            found = decode_relations(parts, spans, relation_labels, relation_threshold)
            candidates_left -= len(found)
            if candidates_left < 0:
                raise compat.validation_error(
                    f"data.relation_threshold: more relations score above "
                    f"{relation_threshold} than the server keeps per request "
                    f"({envs.MAX_ENTITIES.name}={envs.get(envs.MAX_ENTITIES)}); raise it",
                    "data.relation_threshold",
                )
            result: dict[str, Any] = {
                "entities": entities,
                "relations": [
                    {
                        "head": self.relation_end(entities, head),
                        "tail": self.relation_end(entities, tail),
                        "relation": relation,
                        "score": score,
                    }
                    for head, relation, tail, score in found
                ],
            }
            if request.return_windows:
                result["windows"] = len(windows.bounds)
                result["truncated"] = windows.truncated
            if request.return_scores:
                result["scores"] = scores.tolist()
            results.append(result)
        return results[0] if isinstance(request.text, str) else results

    @staticmethod
    def relation_end(entities: Sequence[dict], index: int) -> dict[str, Any]:
        """A relation's head or tail: entity ``index``'s offsets, text and label (``type``)."""
        entity = entities[index]
        return {
            "start": entity["start"],
            "end": entity["end"],
            "text": entity["text"],
            "type": entity["label"],
            "entity_idx": index,
        }

    def decode(
        self,
        request: GLiNERRequest,
        scores: torch.Tensor,
        num_words: int,
        allowed: list[tuple[int, int]] | None,
        max_candidates: int,
    ) -> Any:
        """The kept spans of one text's scores (span or token-level, as the checkpoint);
        ``allowed``: the (first word, last word) spans ``input_spans`` restrict them to."""
        if self.settings.token_level:
            return decode_tokens(
                scores,
                request.threshold,
                request.flat_ner,
                request.multi_label,
                None if allowed is None else set(allowed),
                max_candidates=max_candidates,
            )
        mask = None if allowed is None else span_filter(allowed, num_words, scores.shape[1])
        return decode_spans(
            scores,
            num_words,
            request.threshold,
            request.flat_ner,
            request.multi_label,
            mask,
            max_candidates=max_candidates,
        )


def spans_inside(words: int, max_width: int) -> int:
    """Spans of at most ``max_width`` words that end inside a text of ``words`` words."""
    full = max(0, words - max_width + 1)  # starts with every width inside
    tail = min(words, max_width - 1)  # the last starts, each one width fewer
    return full * max_width + tail * (tail + 1) // 2
