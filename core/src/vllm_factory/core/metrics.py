"""Counters of the API server process, shown on vLLM's ``/metrics``.

Refusals happen in the API process (an IOProcessor's ``parse_data`` / ``pre_process``), which
is also the process that answers ``/metrics``: a plain prometheus_client counter in the default
registry is enough. With several API servers vLLM sets ``PROMETHEUS_MULTIPROC_DIR`` before they
start, and a counter created there sums every process's increments at scrape time.

A refusal is labelled by its field with list indices dropped (``data.text[3]`` counts as
``data.text``: the label set stays the request model's fields, however many texts a client
sends) and a reason out of :data:`REASONS`. Nothing here raises into a request.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

logger = logging.getLogger(__name__)

REFUSED_NAME = "vllm_factory:requests_refused"
REFUSED_HELP = (
    "Requests a vLLM Factory IOProcessor answered with a client error, by field and reason"
)
INVALID = "invalid"
"""The body is not a request this server takes (type, value, missing field, unknown label)."""
OVER_LIMIT = "over_limit"
"""The request is well formed but holds more than a server limit or budget allows."""
MEDIA = "media"
"""An image could not be fetched, decoded or was refused by the media policy."""
REASONS = (INVALID, OVER_LIMIT, MEDIA)

_INDEX = re.compile(r"\[\d+\]|\.\d+(?=\.|$)")
_lock = threading.Lock()
_made: dict[str, Any] = {}
"""Each metric of this process by name, made on first use; None where it could not be."""


def field_label(field: str) -> str:
    """``field`` without list indices: ``data.text[3]`` and ``data.images.2`` become
    ``data.text`` and ``data.images``."""
    return _INDEX.sub("", field) or "data"


def metric(kind: str, name: str, text: str, labels: tuple[str, ...] = (), **options: Any) -> Any:
    """The prometheus_client ``kind`` (``"Counter"``, ``"Histogram"``, ...) named ``name`` in
    the default registry, made once per process; None where prometheus_client is missing or
    the name is taken (the caller counts nothing and serves on)."""
    if name in _made:
        return _made[name]
    with _lock:
        if name not in _made:
            try:
                import prometheus_client

                _made[name] = getattr(prometheus_client, kind)(name, text, list(labels), **options)
            except Exception:
                logger.warning("vLLM Factory metric %s not registered", name, exc_info=True)
                _made[name] = None
    return _made[name]


def count_refused(field: str, reason: str = INVALID) -> None:
    """One more refusal of ``field`` for ``reason`` (one of :data:`REASONS`)."""
    counter = metric("Counter", REFUSED_NAME, REFUSED_HELP, ("field", "reason"))
    if counter is None:
        return
    try:
        counter.labels(field=field_label(field), reason=reason).inc()
    except Exception:  # a metrics failure never fails the request
        logger.debug("refusal not counted", exc_info=True)
