"""``embeddinggemma_io``: sentence-transformers-exact request handling in vLLM's API server.

Request ``data``: ``{"text": str | [str, ...], "prompt_name": str | null, "dimensions": int |
null}``. Each text is prefixed with the checkpoint's prompt for ``prompt_name`` and tokenized
as sentence-transformers does (no stripping; truncation to ``max_seq_length`` keeping the
special tokens). Response ``data``: for one text (a string), its vector ``[...]``; for a
list of texts, one ``{"embedding": [...], "num_tokens": int}`` per text, in input order.

``dimensions`` keeps the first values of the checkpoint's (normalised) embedding, exactly as
``SentenceTransformer.encode(..., truncate_dim=dimensions)`` returns it: not re-normalised.

``embed_dtype`` (``int8``, ``uint8``, ``binary``, ``ubinary``) returns those vectors (after
``dimensions``) as JSON ints, as sentence-transformers' ``quantize_embeddings`` makes them;
int8 / uint8 calibrated on ``calibration`` (``[[min per dimension], [max per dimension]]``),
else on the request's vectors together (two texts at least).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from vllm_factory.core import compat, envs
from vllm_factory.core.io_processor import FactoryIOProcessor, budget_check, json_array
from vllm_factory.core.quantize import COMPACT_DTYPES, calibration_refusal, quantize
from vllm_factory.core.tokens import first_cut, tokenize_cut
from vllm_factory.models.embeddinggemma import ARCHITECTURE
from vllm_factory.models.embeddinggemma.request import EmbeddingGemmaRequest
from vllm_factory.models.embeddinggemma.settings import EmbeddingGemmaSettings, read_settings

logger = logging.getLogger(__name__)


def effective_max_length(
    max_seq_length: int | None,
    tokenizer_max_length: int | None,
    max_position_embeddings: int | None,
) -> int | None:
    """The token budget sentence-transformers applies: ``max_seq_length`` (else the
    tokenizer's ``model_max_length``), capped at the model's ``max_position_embeddings``."""
    limit = max_seq_length or tokenizer_max_length
    if limit is not None and limit > 10**9:  # transformers' "no limit" sentinel
        limit = None
    if max_position_embeddings:
        limit = min(limit, max_position_embeddings) if limit else max_position_embeddings
    return limit


class EmbeddingGemmaIOProcessor(FactoryIOProcessor[EmbeddingGemmaRequest]):
    architecture = ARCHITECTURE

    request_model = EmbeddingGemmaRequest

    def setup(self) -> None:
        hf_config = self.vllm_config.model_config.hf_config
        self.settings: EmbeddingGemmaSettings = read_settings(
            self.checkpoint,
            hf_config.hidden_size,
            getattr(hf_config, "matryoshka_dimensions", None),
        )
        self.tokenizer = self.checkpoint.tokenizer()
        limit = effective_max_length(
            self.settings.max_seq_length,
            getattr(self.tokenizer, "model_max_length", None),
            getattr(hf_config, "max_position_embeddings", None),
        )
        if limit is None or limit > self.max_model_len:
            logger.warning(
                "max_seq_length %s exceeds --max-model-len %d: texts are truncated to %d tokens",
                limit,
                self.max_model_len,
                self.max_model_len,
            )
            limit = self.max_model_len
        self.max_length = limit

    def parse_data(self, data: object) -> EmbeddingGemmaRequest:
        request = super().parse_data(data)
        problem = request.problem()
        if problem is not None:
            raise compat.validation_error(problem[1], problem[0])
        prompts = self.settings.prompts
        if request.prompt_name is not None and request.prompt_name not in prompts:
            known = ", ".join(sorted(prompts)) or "none"
            raise compat.validation_error(
                f"data.prompt_name: unknown prompt {request.prompt_name!r}; this checkpoint "
                f"declares: {known}",
                "data.prompt_name",
            )
        dims = self.settings.matryoshka_dims
        if request.dimensions is not None and request.dimensions not in dims:
            raise compat.validation_error(
                f"data.dimensions: {request.dimensions} is not one of the checkpoint's "
                f"Matryoshka dimensions {list(dims)}",
                "data.dimensions",
            )
        return request

    def encode(self, text: str, prompt_name: str | None) -> list[int]:
        """Token ids exactly as sentence-transformers builds them for ``encode`` (the text
        tokenized as far as the limit reads it: ``tokens``)."""
        prompt = self.settings.prompt_text(prompt_name)
        return tokenize_cut(
            lambda part: self.tokenizer(
                prompt + part, truncation="longest_first", max_length=self.max_length
            )["input_ids"],
            text,
            self.max_length,
        )

    def build_prompts(self, request: EmbeddingGemmaRequest) -> list[list[int]]:
        chars = sum(first_cut(text, self.max_length) for text in request.texts)
        budget_check("data.text", chars, envs.get(envs.MAX_REQUEST_CHARS),
                     "characters (as far as each text is read)", envs.MAX_REQUEST_CHARS.name,
                     "send the texts in several requests")  # fmt: skip
        return [self.encode(text, request.prompt_name) for text in request.texts]

    def build_response(self, request: EmbeddingGemmaRequest, outputs: Sequence[Any]) -> list:
        vectors = []
        for output in outputs:
            vector = output.outputs.data
            if request.dimensions is not None:
                vector = vector[: request.dimensions]
            vectors.append(vector.to("cpu", torch.float32).numpy())
        if request.embed_dtype in COMPACT_DTYPES:
            rows = np.stack(vectors)
            ranges = None
            if request.calibration is not None:
                ranges = np.asarray(request.calibration, dtype=np.float32)
            with calibration_refusal():
                vectors = list(quantize(rows, request.embed_dtype, ranges))
        results = [
            {"embedding": json_array(vector), "num_tokens": len(output.prompt_token_ids)}
            for vector, output in zip(vectors, outputs)
        ]
        # One text (vLLM Factory 0.2's form): its vector; a list of texts: one item per text.
        return results[0]["embedding"] if isinstance(request.text, str) else results
