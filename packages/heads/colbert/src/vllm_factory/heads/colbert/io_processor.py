"""PyLate- and sentence-transformers-exact ColBERT pre/post-processing in vLLM's API server.

Encoding: request ``data`` ``{"text": str | [str, ...], "is_query": bool = false}``; response
``data`` for one text (a string): its token vectors, ``[[float, ...], ...]``; for a list of
texts: one ``{"embeddings": [[float, ...], ...], "num_tokens": int}`` per text, in input
order; vectors are L2-normalised (or compact, ``embed_dtype``: see ``vectors``). With
``"encoding_format": "base64"`` in ``data``, a text
gets such an item (one text: the item itself, a list: one per text), its ``embeddings`` the
base64 of the ``[num_tokens, dim]`` little-endian float32 matrix (row-major), and ``dim`` is
added.

Scoring: request ``data`` ``{"query": str, "documents": [str, ...], "top_k": int}``; the
query and the documents are encoded as above and scored here (MaxSim, see ``scoring``);
response ``data``: ``{"scores": [float per document, in input order], "top": [{"index",
"score"}, ...]}`` (``top`` only with ``top_k``). No vector leaves the server.

Texts are tokenized by the rules of the library that saved the checkpoint (``settings``).
PyLate: queries ``[CLS] [Q] tokens [SEP]`` padded with the mask token to ``query_length``
(query expansion), every token returned; documents ``[CLS] [D] tokens [SEP]`` truncated to
``document_length``, punctuation tokens of the skiplist dropped from the output (they still
take part in attention). sentence-transformers: the task's prompt text prepended, its lengths,
its expansion strategy and its skiplist sides.

Responses are shaped with NumPy, not torch: this runs in the API process for every request, and
a small torch op there (a masked row selection of a 512 x 128 matrix) wakes torch's OpenMP
threads, which then spin: on a 16-thread GPU host most cores stayed busy at a modest rate
(`vllm_factory.testing.usage`'s probe); NumPy does the same work on the calling
thread alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from vllm_factory.core import compat, envs
from vllm_factory.core.io_processor import FactoryIOProcessor, budget_check, json_array
from vllm_factory.core.quantize import COMPACT_DTYPES, calibration_refusal
from vllm_factory.core.tokens import first_cut, tokenize_cut
from vllm_factory.heads.colbert.expansion import expansion_token_id
from vllm_factory.heads.colbert.request import ColBERTRequest
from vllm_factory.heads.colbert.scoring import scores_as, top_k
from vllm_factory.heads.colbert.settings import (
    PYLATE,
    SENTENCE_TRANSFORMERS,
    ColBERTSettings,
    UnsupportedColBERTConfig,
    read_colbert_settings,
)
from vllm_factory.heads.colbert.vectors import as_float32, compact_vectors, encode_vectors

logger = logging.getLogger(__name__)


class ColBERTIOProcessor(FactoryIOProcessor[ColBERTRequest]):
    request_model = ColBERTRequest
    selected_by = "--config-format colbert"

    def setup(self) -> None:
        self.settings: ColBERTSettings = read_colbert_settings(self.checkpoint)
        self.tokenizer = self.checkpoint.tokenizer()
        settings, tok = self.settings, self.tokenizer
        self.query_prefix_id = self._token_id(settings.query_prefix)
        self.document_prefix_id = self._token_id(settings.document_prefix)
        self.expansion_id = expansion_token_id(tok) if settings.do_query_expansion else None
        if settings.do_query_expansion and tok.padding_side != "right":
            # Both libraries put expansion tokens where padding goes: left would be before the
            # text, which the served models do not hide from attention.
            raise UnsupportedColBERTConfig(
                f"{self.checkpoint.model}/tokenizer_config.json: padding_side: "
                f"{tok.padding_side!r} is not supported with query expansion (right only)"
            )
        no_token = tok.mask_token_id is None and tok.eos_token_id is None
        if settings.layout == SENTENCE_TRANSFORMERS and self.expansion_id is not None and no_token:
            raise UnsupportedColBERTConfig(
                f"{self.checkpoint.model}: query expansion needs a mask or EOS token"
            )
        self.skiplist_ids = self._skiplist_ids()
        self._skiplist_array = np.array(sorted(self.skiplist_ids), dtype=np.int64)
        self.limits = {True: self._limit(is_query=True), False: self._limit(is_query=False)}

    def _token_id(self, prefix: str) -> int | None:
        return self.tokenizer.convert_tokens_to_ids(prefix) if prefix else None

    def _skiplist_ids(self) -> frozenset[int]:
        """PyLate maps each skiplist word through the vocabulary (unknown words -> the UNK id);
        sentence-transformers drops words that are not single vocabulary tokens."""
        tok, ids = self.tokenizer, set()
        for word in self.settings.skiplist_words:
            token_id = tok.convert_tokens_to_ids(word)
            unknown = token_id == tok.unk_token_id and word != tok.unk_token
            if not (unknown and self.settings.skiplist_drops_unknown):
                ids.add(token_id)
        return frozenset(ids)

    def _limit(self, is_query: bool) -> int:
        """Most tokens a query / document prompt may have (including special tokens)."""
        settings = self.settings
        if settings.layout == PYLATE:
            longest = max(settings.query_length, settings.document_length)
            if longest > self.max_model_len:
                raise ValueError(
                    f"--max-model-len {self.max_model_len} is shorter than the checkpoint's "
                    f"query/document length {longest}; start vLLM with --max-model-len {longest}"
                )
            return settings.query_length if is_query else settings.document_length
        # sentence-transformers: the task's length, else the tokenizer's own limit (which it
        # caps at the model's position count); "fixed" expansion fixes query length.
        positions = (self.checkpoint.json("config.json") or {}).get("max_position_embeddings")
        default = int(self.tokenizer.model_max_length)
        if positions:
            default = min(default, int(positions))
        length = settings.query_length if is_query else settings.document_length
        limit = default if length is None else length
        if is_query and settings.do_query_expansion:
            floor = settings.expansion_length
            limit = floor if settings.expansion_strategy == "fixed" else max(limit, floor)
        if limit > self.max_model_len:
            logger.warning(
                "%s are truncated at --max-model-len %d; sentence-transformers keeps up to %d "
                "tokens, so longer inputs score differently (raise --max-model-len)",
                "queries" if is_query else "documents", self.max_model_len, limit,
            )  # fmt: skip
            limit = self.max_model_len
        return limit

    def encode(self, text: str, is_query: bool) -> list[int]:
        """Token ids exactly as the library that saved the checkpoint builds them."""
        if self.settings.layout == PYLATE:
            return self._encode_pylate(text, is_query)
        settings = self.settings
        prompt = settings.query_prompt if is_query else settings.document_prompt
        limit = self.limits[is_query]
        ids = tokenize_cut(
            lambda part: self.tokenizer(
                prompt + part, truncation="longest_first", max_length=limit
            )["input_ids"],
            text,
            limit,
        )
        if is_query and self.expansion_id is not None:
            ids = ids + [self.expansion_id] * (settings.expansion_length - len(ids))
        return ids

    def _encode_pylate(self, text: str, is_query: bool) -> list[int]:
        """PyLate's ``ColBERT.tokenize``: prefix token after the first, expansion to length."""
        settings = self.settings
        text = text.strip()  # sentence-transformers 5 (PyLate's base) strips every input
        if settings.do_lower_case:
            text = text.lower()
        prefix_id = self.query_prefix_id if is_query else self.document_prefix_id
        length = self.limits[is_query]
        room = length - 1 if prefix_id is not None else length
        ids = tokenize_cut(
            lambda part: self.tokenizer(part, truncation="longest_first", max_length=room)[
                "input_ids"
            ],
            text,
            room,
        )
        if is_query and self.expansion_id is not None:
            ids = ids + [self.expansion_id] * (room - len(ids))
        if prefix_id is not None:
            ids = ids[:1] + [prefix_id] + ids[1:]
        return ids

    def parse_data(self, data: object) -> ColBERTRequest:
        request = super().parse_data(data)
        problem = request.problem()
        if problem is not None:
            raise compat.validation_error(problem[1], problem[0])
        return request

    def build_prompts(self, request: ColBERTRequest) -> list[list[int]]:
        queries = [request.is_scoring or request.is_query] + [request.is_query] * (
            len(request.texts) - 1
        )
        chars = sum(first_cut(t, self.limits[q]) for t, q in zip(request.texts, queries))
        field = "data.documents" if request.is_scoring else "data.text"
        budget_check(field, chars, envs.get(envs.MAX_REQUEST_CHARS),
                     "characters (as far as each text is read)", envs.MAX_REQUEST_CHARS.name,
                     "send the texts in several requests")  # fmt: skip
        if request.is_scoring:
            documents = [self.encode(text, is_query=False) for text in request.documents]
            return [self.encode(request.query, is_query=True), *documents]
        return [self.encode(text, request.is_query) for text in request.texts]

    def build_response(self, request: ColBERTRequest, outputs: Sequence[Any]) -> list | dict:
        if request.is_scoring:
            query = self.kept_vectors(outputs[0], is_query=True)
            documents = [self.kept_vectors(o, is_query=False) for o in outputs[1:]]
            with calibration_refusal():
                scores = scores_as(request.embed_dtype, query, documents, request.calibration)
            if request.top_k is None:
                return {"scores": scores}
            return {"scores": scores, "top": top_k(scores, request.top_k)}
        matrices = [self.kept_vectors(output, request.is_query) for output in outputs]
        if request.embed_dtype in COMPACT_DTYPES:
            with calibration_refusal():
                matrices = compact_vectors(matrices, request.embed_dtype, request.calibration)
        if request.bare_vectors:  # one text, JSON vectors: vLLM Factory 0.2's form
            return json_array(matrices[0])
        results = [
            encode_vectors(vectors, request.encoding_format, request.embed_dtype)
            for vectors in matrices
        ]
        return results[0] if isinstance(request.text, str) else results

    def kept_vectors(self, output: Any, is_query: bool) -> np.ndarray:
        """The float32 vectors a text is represented by: all of them, less the skiplist tokens
        on the sides the checkpoint skips them (documents only, for PyLate); those still take
        part in attention."""
        vectors = as_float32(output.outputs.data)
        if ("query" if is_query else "document") not in self.settings.skiplist_tasks:
            return vectors
        token_ids = np.asarray(output.prompt_token_ids, dtype=np.int64)
        return vectors[~np.isin(token_ids, self._skiplist_array)]
