"""ColPali request handling in vLLM's API server: the reference library's prompts for texts and
images, image decoding under limits, and the response (token vectors, or MaxSim scores).

A model package subclasses :class:`ColPaliIOProcessor` and states its reference processor's
prompts (``query_prefix``, ``query_suffix``, ``image_prompt``); texts are tokenized here exactly
as that processor does, images go to vLLM's multimodal processor for the backbone (the model's
own image processor: resizing, patching, image token count) with ``image_prompt``'s one image
placeholder. Every token's vector is returned, as the reference returns every position its
attention mask keeps.

Request and response: see ``request`` and the package README.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from transformers import AutoTokenizer
from vllm_factory.core import compat
from vllm_factory.core.io_processor import FactoryIOProcessor
from vllm_factory.heads.colbert.scoring import maxsim_scores, top_k
from vllm_factory.heads.colbert.vectors import as_float32, encode_vectors
from vllm_factory.heads.colpali.images import (
    HTTP_URL,
    LOCAL_PATH,
    ImageError,
    ImageLimits,
    as_rgb,
    inline_bytes,
    open_image,
    source_kind,
)
from vllm_factory.heads.colpali.request import ColPaliRequest


class ColPaliIOProcessor(FactoryIOProcessor[ColPaliRequest]):
    request_model = ColPaliRequest
    selected_by = "--config-format colpali"
    # The reference processor's prompts (colpali-engine: ``process_queries``,
    # ``process_texts``, ``process_images``); a package sets them.
    query_prefix: ClassVar[str] = ""
    query_suffix: ClassVar[str] = ""
    image_prompt: ClassVar[str] = ""

    def setup(self) -> None:
        # Never the checkpoint's remote code (an auto_map in its config.json): ours serves it.
        self.tokenizer = AutoTokenizer.from_pretrained(
            self.checkpoint.model, revision=self.checkpoint.revision, trust_remote_code=False
        )
        image_prompt = self.image_prompt_text()
        if not image_prompt:
            raise TypeError(f"{type(self).__name__} must set image_prompt")
        self.image_prompt_ids: list[int] = self.tokenizer(image_prompt)["input_ids"]
        self.limits = ImageLimits.from_env()
        self.media = compat.media_connector(self.vllm_config.model_config)

    def image_prompt_text(self) -> str:
        """The prompt around one image, with one image placeholder: :attr:`image_prompt`, or,
        in a package whose reference builds it from the checkpoint (its chat template), what
        that package's override reads there (``self.tokenizer`` is loaded by then)."""
        return self.image_prompt

    # -- requests ------------------------------------------------------------------------

    def parse_data(self, data: object) -> ColPaliRequest:
        request = super().parse_data(data)
        problem = request.problem()
        if problem is not None:
            raise compat.validation_error(problem[1], problem[0])
        field = "data.images" if request.is_scoring else "data.image"
        sources = request.image_sources
        for i, source in enumerate(sources):
            where = field if isinstance(request.image, str) else f"{field}.{i}"
            try:
                request._decoded.append(self.load_image(source))
            except ImageError as error:
                raise compat.validation_error(f"{where}: {error}", where) from None
        return request

    def load_image(self, source: str) -> Any:
        """The RGB image a request names (see ``images`` for the forms and limits)."""
        kind = source_kind(source)
        if kind in (HTTP_URL, LOCAL_PATH):
            url = Path(source).as_uri() if source.startswith("/") else source
            try:
                raw = compat.fetch_media_bytes(self.media, url, self.limits.max_bytes)
            except Exception as error:  # noqa: BLE001 - vLLM's fetch errors vary by version
                raise ImageError(f"could not be fetched ({error})") from None
            if len(raw) > self.limits.max_bytes:
                raise ImageError(f"larger than {self.limits.max_bytes} bytes")
        else:
            raw = inline_bytes(source, self.limits)
        return as_rgb(open_image(raw, self.limits))

    def text_ids(self, text: str, is_query: bool) -> list[int]:
        """Token ids exactly as the reference processor makes them for one text."""
        if is_query:
            text = self.query_prefix + text + self.query_suffix
        return self.tokenizer(text)["input_ids"]

    def build_prompts(self, request: ColPaliRequest) -> list[list[int] | dict]:
        images = [
            {"prompt_token_ids": list(self.image_prompt_ids), "multi_modal_data": {"image": im}}
            for im in request._decoded
        ]
        if request.is_scoring:
            query = self.text_ids(request.query, is_query=True)
            documents = [self.text_ids(t, is_query=False) for t in request.texts]
            return [query, *images, *documents]
        texts = [self.text_ids(t, request.is_query) for t in request.texts]
        return texts or images

    # -- responses -----------------------------------------------------------------------

    def build_response(self, request: ColPaliRequest, outputs: Sequence[Any]) -> Any:
        vectors = [as_float32(output.outputs.data) for output in outputs]
        if request.is_scoring:
            query, documents = vectors[0], vectors[1:]
            scores = maxsim_scores(
                torch.from_numpy(query), [torch.from_numpy(d) for d in documents]
            )
            if request.top_k is None:
                return {"scores": scores}
            return {"scores": scores, "top": top_k(scores, request.top_k)}
        if request.bare_vectors:  # one text or image, float vectors: 0.2's form
            return vectors[0].tolist()
        items = [encode_vectors(v, request.encoding_format, request.embed_dtype) for v in vectors]
        return items[0] if request.one_input else items
