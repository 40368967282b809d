"""PyLate-exact ColBERT pre/post-processing inside vLLM's API server.

Encoding: request ``data`` ``{"text": str | [str, ...], "is_query": bool = false}``; response
``data``: one ``{"embeddings": [[float, ...], ...], "num_tokens": int}`` per text, in input
order; vectors are L2-normalised. With ``"encoding_format": "base64"`` in ``data``,
``embeddings`` is instead the base64 of the ``[num_tokens, dim]`` little-endian float32
matrix (row-major) and ``dim`` is added.

Scoring: request ``data`` ``{"query": str, "documents": [str, ...], "top_k": int}``; the
query and the documents are encoded as above and scored here (MaxSim, see ``scoring``);
response ``data``: ``{"scores": [float per document, in input order], "top": [{"index",
"score"}, ...]}`` (``top`` only with ``top_k``). No vector leaves the server.

Queries: ``[CLS] [Q] tokens [SEP]`` padded with the mask token to ``query_length`` (query
expansion); every token is returned. Documents: ``[CLS] [D] tokens [SEP]`` truncated to
``document_length``; punctuation tokens of the skiplist are dropped from the output (they
still take part in attention), as PyLate does.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import torch
from transformers import AutoTokenizer
from vllm_factory.core import compat
from vllm_factory.core.io_processor import FactoryIOProcessor
from vllm_factory.heads.colbert.expansion import expansion_token_id
from vllm_factory.heads.colbert.request import ColBERTRequest
from vllm_factory.heads.colbert.scoring import maxsim_scores, top_k
from vllm_factory.heads.colbert.settings import ColBERTSettings, read_colbert_settings


class ColBERTIOProcessor(FactoryIOProcessor[ColBERTRequest]):
    request_model = ColBERTRequest

    def setup(self) -> None:
        self.settings: ColBERTSettings = read_colbert_settings(self.checkpoint)
        self.tokenizer = AutoTokenizer.from_pretrained(
            self.checkpoint.model, revision=self.checkpoint.revision
        )
        tok = self.tokenizer
        self.query_prefix_id = self._token_id(self.settings.query_prefix)
        self.document_prefix_id = self._token_id(self.settings.document_prefix)
        self.expansion_id = expansion_token_id(tok)
        # PyLate maps each skiplist word through the vocabulary (unknown words -> UNK id).
        self.skiplist_ids = frozenset(
            tok.convert_tokens_to_ids(word) for word in self.settings.skiplist_words
        )
        longest = max(self.settings.query_length, self.settings.document_length)
        if longest > self.max_model_len:
            raise ValueError(
                f"--max-model-len {self.max_model_len} is shorter than the checkpoint's "
                f"query/document length {longest}; start vLLM with --max-model-len {longest}"
            )

    def _token_id(self, prefix: str) -> int | None:
        return self.tokenizer.convert_tokens_to_ids(prefix) if prefix else None

    def encode(self, text: str, is_query: bool) -> list[int]:
        """Token ids exactly as PyLate's ``ColBERT.tokenize`` builds them."""
        settings = self.settings
        text = text.strip()  # sentence-transformers strips every input
        if settings.do_lower_case:
            text = text.lower()
        prefix_id = self.query_prefix_id if is_query else self.document_prefix_id
        length = settings.query_length if is_query else settings.document_length
        room = length - 1 if prefix_id is not None else length
        ids = self.tokenizer(text, truncation="longest_first", max_length=room)["input_ids"]
        if is_query and settings.do_query_expansion:
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
        if request.is_scoring:
            documents = [self.encode(text, is_query=False) for text in request.documents]
            return [self.encode(request.query, is_query=True), *documents]
        return [self.encode(text, request.is_query) for text in request.texts]

    def build_response(self, request: ColBERTRequest, outputs: Sequence[Any]) -> list[dict] | dict:
        if request.is_scoring:
            query = outputs[0].outputs.data.float().cpu()
            documents = [self.kept_vectors(output).float().cpu() for output in outputs[1:]]
            scores = maxsim_scores(query, documents)
            if request.top_k is None:
                return {"scores": scores}
            return {"scores": scores, "top": top_k(scores, request.top_k)}
        results = []
        for output in outputs:
            vectors = output.outputs.data if request.is_query else self.kept_vectors(output)
            results.append(
                self._encode_vectors(vectors.float(), request.encoding_format or "float")
            )
        return results

    def kept_vectors(self, output: Any) -> torch.Tensor:
        """A document's vectors without its skiplist tokens (they take part in attention only)."""
        vectors = output.outputs.data
        keep = [t not in self.skiplist_ids for t in output.prompt_token_ids]
        return vectors[torch.tensor(keep, dtype=torch.bool, device=vectors.device)]

    @staticmethod
    def _encode_vectors(vectors: torch.Tensor, encoding_format: str) -> dict:
        if encoding_format == "base64":
            raw = vectors.cpu().contiguous().numpy().astype("<f4", copy=False).tobytes()
            return {
                "embeddings": base64.b64encode(raw).decode("ascii"),
                "num_tokens": len(vectors),
                "dim": vectors.shape[1],
            }
        return {"embeddings": vectors.tolist(), "num_tokens": len(vectors)}
