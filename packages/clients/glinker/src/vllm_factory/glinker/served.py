"""``ServedGLiNER``: the part of gliner's ``GLiNER`` that glinker's components call, answered
by a vLLM Factory GLiNER server (``POST /pooling``) instead of a model in this process.

No glinker, gliner, torch or vLLM import: a pipeline process that only talks to the server
needs httpx alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import httpx

logger = logging.getLogger(__name__)


class ServerError(RuntimeError):
    """The server refused a request (its message names the field) or could not be reached."""


class ServedConfig:
    """What the served model needs to know besides the model name (glinker's ``max_length``
    is gliner's ``from_pretrained(max_length=...)``: words kept per text)."""

    def __init__(self, max_length: int | None = None) -> None:
        self.max_len = max_length
        # glinker reads ``model.config.labels_encoder`` to decide whether to precompute label
        # embeddings; a served bi-encoder caches them in the server instead.
        self.labels_encoder = None


class ServedGLiNER:
    """``predict_entities`` / ``inference`` with gliner's arguments and results, served.

    ``url``: the server's base URL (``http://host:8000``); ``model``: the served model name
    (what ``vllm serve`` was given, or ``--served-model-name``)."""

    def __init__(
        self,
        url: str,
        model: str,
        max_length: int | None = None,
        timeout: float = 120.0,
        client: httpx.Client | None = None,
        long_text: str | None = "truncate",
    ) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self.config = ServedConfig(max_length)
        # gliner reads what fits its first prompt; the server's default reads a text whole in
        # windows. A stand-in for gliner's model keeps gliner's reading unless told otherwise
        # ("window", or None for the server's default).
        self.long_text = long_text
        self._client = client or httpx.Client(timeout=timeout)

    def to(self, device: Any) -> ServedGLiNER:
        """glinker moves its model to a device; a served model stays where it is served."""
        return self

    def eval(self) -> ServedGLiNER:
        return self

    def predict_entities(self, text: str, labels: Sequence[str], **options: Any) -> list[dict]:
        """Entities of one text, as ``GLiNER.predict_entities`` returns them (the options of
        :meth:`inference`; ``input_spans`` holds this text's list)."""
        return self.inference([text], labels, **options)[0]

    def inference(
        self,
        texts: Sequence[str],
        labels: Sequence[str],
        threshold: float = 0.5,
        flat_ner: bool = True,
        multi_label: bool = False,
        return_class_probs: bool = False,
        input_spans: Sequence[Sequence[dict]] | None = None,
        **unsupported: Any,
    ) -> list[list[dict]]:
        """Entities per text, as ``GLiNER.inference`` returns them (one request; texts gliner
        skips, empty or blank ones, get no entities without reaching the server)."""
        ignored = {k: v for k, v in unsupported.items() if k not in ("batch_size",)}
        if ignored:
            raise TypeError(f"ServedGLiNER does not support {sorted(ignored)}")
        results: list[list[dict]] = [[] for _ in texts]
        keep = [i for i, text in enumerate(texts) if isinstance(text, str) and text.strip()]
        if not keep or not labels:
            return results
        data: dict[str, Any] = {
            "text": [texts[i] for i in keep],
            "labels": list(labels),
            "threshold": threshold,
            "flat_ner": flat_ner,
            "multi_label": multi_label,
            "return_class_probs": return_class_probs,
        }
        if input_spans is not None:
            data["input_spans"] = [_plain_spans(input_spans[i]) for i in keep]
        if self.config.max_len is not None:
            data["max_len"] = self.config.max_len
        if self.long_text is not None:
            data["long_text"] = self.long_text
        for i, entities in zip(keep, self.pool(data)):
            results[i] = entities
        return results

    def pool(self, data: dict[str, Any]) -> list:
        """One ``POST /pooling`` with ``data``; the response's ``data``."""
        try:
            response = self._client.post(
                f"{self.url}/pooling", json={"model": self.model, "data": data}
            )
        except httpx.HTTPError as error:
            raise ServerError(f"{self.url}: {error}") from error
        if response.status_code != 200:
            raise ServerError(f"{self.url} answered {response.status_code}: {response.text}")
        return response.json()["data"]

    def close(self) -> None:
        self._client.close()


def _plain_spans(spans: Sequence[dict] | None) -> list[dict] | None:
    """glinker's span dicts (or objects with ``start`` / ``end``) as JSON."""
    if spans is None:
        return None
    plain = []
    for span in spans:
        start = span["start"] if isinstance(span, dict) else span.start
        end = span["end"] if isinstance(span, dict) else span.end
        plain.append({"start": int(start), "end": int(end)})
    return plain
