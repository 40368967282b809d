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

from vllm_factory.core import compat, envs, metrics
from vllm_factory.core.io_processor import FactoryIOProcessor, budget_check, json_array
from vllm_factory.core.quantize import COMPACT_DTYPES, calibration_refusal
from vllm_factory.core.tokens import first_cut, tokenize_cut
from vllm_factory.heads.colbert.scoring import scores_as, top_k
from vllm_factory.heads.colbert.vectors import as_float32, compact_vectors, encode_vectors
from vllm_factory.heads.colpali.fetch import Fetcher, FetchError, MediaPolicy
from vllm_factory.heads.colpali.images import (
    HTTP_URL,
    LOCAL_PATH,
    ImageError,
    ImageLimits,
    decode,
    inline_bytes,
    local_file,
    open_header,
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
        self.tokenizer = self.checkpoint.tokenizer()
        image_prompt = self.image_prompt_text()
        if not image_prompt:
            raise TypeError(f"{type(self).__name__} must set image_prompt")
        self.image_prompt_ids: list[int] = self.tokenizer(image_prompt)["input_ids"]
        self.limits = ImageLimits.from_env()
        self.local_root = allowed_local_root(self.vllm_config.model_config)
        self.fetcher = Fetcher(media_policy(self.vllm_config.model_config))

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
        request._decoded = self.load_images(request)
        return request

    def load_images(self, request: ColPaliRequest) -> list[Any]:
        """The RGB images a request names (see ``images`` for the forms and limits): every
        URL fetched at once under one deadline, every header checked (each image's pixels, and
        all of the request's together) before any pixel is decoded."""
        field = "data.images" if request.is_scoring else "data.image"
        sources = request.image_sources

        def where(i: int) -> str:
            return field if isinstance(request.image, str) else f"{field}.{i}"

        def refuse(i: int, error: Exception) -> Exception:
            return compat.validation_error(f"{where(i)}: {error}", where(i), metrics.MEDIA)

        kinds = [source_kind(source, self.local_root) for source in sources]
        urls = [source for source, kind in zip(sources, kinds) if kind == HTTP_URL]
        fetched = iter(self.fetcher.fetch(urls, self.limits.max_bytes) if urls else ())
        headers, pixels = [], 0
        for i, (source, kind) in enumerate(zip(sources, kinds)):
            try:
                if kind == HTTP_URL:
                    raw = next(fetched)
                    if isinstance(raw, FetchError):
                        raise ImageError(str(raw))
                elif kind == LOCAL_PATH:
                    raw = local_file(source, self.local_root, self.limits.max_bytes)
                else:
                    raw = inline_bytes(source, self.limits)
                header = open_header(raw, self.limits)
            except ImageError as error:
                raise refuse(i, error) from None
            pixels += header.width * header.height
            if pixels > self.limits.request_pixels:
                raise refuse(i, ImageError(
                    f"the request's images hold more than {self.limits.request_pixels} pixels "
                    "in all (VLLM_FACTORY_REQUEST_MAX_PIXELS); send fewer or smaller images"
                ))  # fmt: skip
            headers.append(header)
        images = []
        for i, header in enumerate(headers):
            try:
                images.append(decode(header))
            except ImageError as error:
                raise refuse(i, error) from None
        return images

    def text_ids(self, text: str, is_query: bool, field: str = "data.text") -> list[int]:
        """Token ids exactly as the reference processor makes them for one text (which does not
        truncate): a text longer than the server's ``--max-model-len`` is refused, tokenized
        only as far as that limit reads."""
        prefix, suffix = (self.query_prefix, self.query_suffix) if is_query else ("", "")
        limit = self.max_model_len
        ids = tokenize_cut(
            lambda part: self.tokenizer(
                prefix + part + suffix, truncation=True, max_length=limit + 1
            )["input_ids"],
            text,
            limit + 1,
        )
        if len(ids) > limit:
            raise compat.validation_error(
                f"{field}: longer than the server's {limit} tokens (--max-model-len)",
                field,
                metrics.OVER_LIMIT,
            )
        return ids

    def build_prompts(self, request: ColPaliRequest) -> list[list[int] | dict]:
        chars = sum(first_cut(text, self.max_model_len + 1) for text in request.texts)
        if request.is_scoring:
            chars += first_cut(request.query, self.max_model_len + 1)
        budget_check(
            "data.text" if not request.is_scoring else "data.documents",
            chars,
            envs.get(envs.MAX_REQUEST_CHARS),
            "characters (as far as each text is read)",
            envs.MAX_REQUEST_CHARS.name,
            "send the texts in several requests",
        )
        images = [
            {"prompt_token_ids": list(self.image_prompt_ids), "multi_modal_data": {"image": im}}
            for im in request._decoded
        ]
        request._decoded = []  # the prompts hold the images now; the pending request need not
        if request.is_scoring:
            query = self.text_ids(request.query, is_query=True, field="data.query")
            documents = [
                self.text_ids(t, is_query=False, field=f"data.documents.{i}")
                for i, t in enumerate(request.texts)
            ]
            return [query, *images, *documents]
        one = isinstance(request.text, str)
        texts = [
            self.text_ids(t, request.is_query, field="data.text" if one else f"data.text.{i}")
            for i, t in enumerate(request.texts)
        ]
        return texts or images

    # -- responses -----------------------------------------------------------------------

    def build_response(self, request: ColPaliRequest, outputs: Sequence[Any]) -> Any:
        vectors = [as_float32(output.outputs.data) for output in outputs]
        if request.is_scoring:
            query, documents = vectors[0], vectors[1:]
            with calibration_refusal():
                scores = scores_as(request.embed_dtype, query, documents, request.calibration)
            if request.top_k is None:
                return {"scores": scores}
            return {"scores": scores, "top": top_k(scores, request.top_k)}
        if request.embed_dtype in COMPACT_DTYPES:
            with calibration_refusal():
                vectors = compact_vectors(vectors, request.embed_dtype, request.calibration)
        if request.bare_vectors:  # one text or image, JSON vectors: 0.2's form
            return json_array(vectors[0])
        items = [encode_vectors(v, request.encoding_format, request.embed_dtype) for v in vectors]
        return items[0] if request.one_input else items


def allowed_local_root(model_config: Any) -> Path | None:
    """The server's ``--allowed-local-media-path``, resolved (None: local files refused)."""
    root = getattr(model_config, "allowed_local_media_path", "") or ""
    return Path(root).resolve() if root else None


def media_policy(model_config: Any) -> MediaPolicy:
    """How image URLs are fetched: vLLM's media settings (``--allowed-media-domains``,
    ``VLLM_MEDIA_URL_ALLOW_REDIRECTS``, ``VLLM_IMAGE_FETCH_TIMEOUT``) and ours."""
    from vllm import envs as vllm_envs

    deadline = envs.get(envs.MEDIA_FETCH_DEADLINE)
    vllm_timeout = getattr(vllm_envs, "VLLM_IMAGE_FETCH_TIMEOUT", None)
    if vllm_timeout:
        deadline = min(deadline, float(vllm_timeout))
    return MediaPolicy(
        allowed_domains=tuple(getattr(model_config, "allowed_media_domains", None) or ()),
        allow_private=envs.get(envs.MEDIA_ALLOW_PRIVATE),
        allow_redirects=bool(getattr(vllm_envs, "VLLM_MEDIA_URL_ALLOW_REDIRECTS", True)),
        deadline=deadline,
        max_concurrent=envs.get(envs.MEDIA_MAX_CONCURRENT_FETCHES),
    )
