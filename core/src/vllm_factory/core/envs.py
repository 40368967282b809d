"""The environment variables vLLM Factory reads, in one typed registry (in the manner of vLLM's
own ``vllm/envs.py``): each has a name, a type, a default and a meaning, and is parsed one way.

Read a value with ``envs.get(envs.MAX_REQUEST_CHARS)``: the default when the variable is unset or
empty, the parsed value otherwise, and a ``ValueError`` naming the variable when it cannot be
parsed (a server then stops at start-up, where the value is first read, rather than serve with a
setting it did not mean). ``python -m vllm_factory.core.envs`` lists them all.

This module imports neither vLLM nor torch.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

logger = logging.getLogger(__name__)

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected one of {', '.join(_TRUE + _FALSE)}")


def _parse_int(raw: str, minimum: int) -> int:
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise ValueError("expected a whole number") from None
    if value < minimum:
        raise ValueError(f"must be at least {minimum}")
    return value


def parse_positive_int(raw: str) -> int:
    return _parse_int(raw, 1)


def parse_positive_float(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError("expected a number") from None
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a positive finite number")
    return value


def parse_non_negative_int(raw: str) -> int:
    return _parse_int(raw, 0)


def parse_text(raw: str) -> str:
    return raw.strip()


def parse_choice(*choices: str) -> Callable[[str], str]:
    """A parser that takes one of ``choices`` (case-insensitive)."""

    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value

    return parse


def parse_lstm_kernel(raw: str) -> str:
    if raw.strip() == "1":
        raise ValueError(
            "the one-launch LSTM kernel (1) is no longer offered (it lost to cuDNN served); "
            "expected steps or cudnn"
        )
    return parse_choice("steps", "cudnn")(raw)


def parse_names(raw: str) -> tuple[str, ...]:
    names = tuple(part.strip().upper() for part in raw.split(",") if part.strip())
    if not names:
        raise ValueError("expected a comma-separated list of names")
    return names


@dataclass(frozen=True)
class Setting(Generic[T]):
    name: str
    default: T
    doc: str
    parse: Callable[[str], T]


REGISTRY: dict[str, Setting] = {}


def _setting(name: str, default: T, parse: Callable[[str], T], doc: str) -> Setting[T]:
    setting = Setting(name, default, doc, parse)
    REGISTRY[name] = setting
    return setting


def get(setting: Setting[T]) -> T:
    """``setting``'s value in this process's environment."""
    raw = os.environ.get(setting.name)
    if raw is None or not raw.strip():
        return setting.default
    try:
        return setting.parse(raw)
    except ValueError as error:
        raise ValueError(f"{setting.name}={raw!r}: {error}") from None


def is_set(setting: Setting) -> bool:
    """Whether the environment gives ``setting`` a value (not unset, not empty)."""
    return bool(os.environ.get(setting.name, "").strip())


# -- bounded work per request (read by the IOProcessors, in the API server) ---------------------

MAX_REQUEST_CHARS = _setting(
    "VLLM_FACTORY_MAX_REQUEST_CHARS", 2_000_000, parse_positive_int,
    "Characters a request's texts (and labels) may hold in all, each text counted as cut to "
    "what the model reads: vLLM runs an IOProcessor's tokenizing on the API server's event "
    "loop, so this bounds how long one request holds it.",
)  # fmt: skip
GLINER_MAX_CELLS = _setting(
    "VLLM_FACTORY_GLINER_MAX_CELLS", 1 << 25, parse_positive_int,
    "Span x label cells a GLiNER request may score (texts x words x span width x labels): "
    "the engine's score memory for the request and what it sends back (4 bytes a cell).",
)  # fmt: skip
MAX_RETURNED_SCORES = _setting(
    "VLLM_FACTORY_MAX_RETURNED_SCORES", 1 << 20, parse_positive_int,
    "Scores a request may ask back with return_scores (GLiNER cells, GLiNER2 span scores), "
    "each a JSON number in the response.",
)  # fmt: skip
MAX_PROMPT_DATA_BYTES = _setting(
    "VLLM_FACTORY_MAX_PROMPT_DATA_BYTES", 64 * 1024 * 1024, parse_positive_int,
    "Bytes of per-prompt data (GLiNER / GLiNER2 word layouts, bi-encoder label ids) a request "
    "sends the engine, counted once per prompt: vLLM gives every prompt of a request the "
    "request's one set of pooling parameters, so this data travels (and is copied) as many "
    "times as the request has prompts.",
)  # fmt: skip
MAX_ENTITIES = _setting(
    "VLLM_FACTORY_MAX_ENTITIES", 1 << 18, parse_positive_int,
    "Spans a GLiNER / GLiNER2 request may keep as candidates above its threshold (each becomes "
    "a Python object in the API server); a request over it gets a 400 naming the threshold.",
)  # fmt: skip

# -- long texts (GLiNER, GLiNER2; read by the IOProcessors) ------------------------------------------

LONG_TEXT = _setting(
    "VLLM_FACTORY_LONG_TEXT", "window", parse_choice("window", "truncate", "error"),
    "What a GLiNER or GLiNER2 server does with a text longer than its model reads, where the "
    "request does not say (data.long_text): window (read it whole, in overlapping windows "
    "batched together, and merge), truncate (read its start only, as the libraries do) or "
    "error (a 400 naming the text).",
)  # fmt: skip
MAX_WINDOWS = _setting(
    "VLLM_FACTORY_MAX_WINDOWS", 512, parse_positive_int,
    "Windows a request's texts may use in all when they are read in windows: each window is "
    "a model input (per label chunk), so this bounds the inputs one request adds to a step.",
)  # fmt: skip

# -- images (ColPali models) ------------------------------------------------------------------------

IMAGE_MAX_BYTES = _setting(
    "VLLM_FACTORY_IMAGE_MAX_BYTES", 20 * 1024 * 1024, parse_positive_int,
    "Largest encoded image (bytes), inline or fetched.",
)  # fmt: skip
IMAGE_MAX_PIXELS = _setting(
    "VLLM_FACTORY_IMAGE_MAX_PIXELS", 40_000_000, parse_positive_int,
    "Largest image (width x height), checked from the file header before it is decoded.",
)  # fmt: skip
REQUEST_MAX_PIXELS = _setting(
    "VLLM_FACTORY_REQUEST_MAX_PIXELS", 64_000_000, parse_positive_int,
    "Pixels a request's images may hold in all: they are decoded on the API server's event "
    "loop and held until the request's prompts are built.",
)  # fmt: skip
IMAGE_FORMATS = _setting(
    "VLLM_FACTORY_IMAGE_FORMATS", ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF"), parse_names,
    "Image formats (Pillow's names) a request may send; any other is refused before decoding.",
)  # fmt: skip
MEDIA_ALLOW_PRIVATE = _setting(
    "VLLM_FACTORY_MEDIA_ALLOW_PRIVATE", False, parse_flag,
    "Fetch image URLs whose host resolves to a private, loopback, link-local, shared or "
    "otherwise non-public address (cloud metadata endpoints included); refused by default.",
)  # fmt: skip
MEDIA_FETCH_DEADLINE = _setting(
    "VLLM_FACTORY_MEDIA_FETCH_DEADLINE", 5.0, parse_positive_float,
    "Seconds all image URLs of one request may take to fetch, together (one deadline per "
    "request, not per read; also capped by vLLM's VLLM_IMAGE_FETCH_TIMEOUT).",
)  # fmt: skip
MEDIA_MAX_CONCURRENT_FETCHES = _setting(
    "VLLM_FACTORY_MEDIA_MAX_CONCURRENT_FETCHES", 16, parse_positive_int,
    "Image URLs an API server process fetches at once, over all requests.",
)  # fmt: skip


# -- engine switches (read where the model runs; on or off by device where the default is None) ---

DISABLE_TRITON = _setting(
    "VLLM_FACTORY_DISABLE_TRITON", False, parse_flag,
    "Every vllm_factory.kernels call takes its PyTorch fallback (same signature) instead of "
    "Triton; encoders then attend outside their compiled graphs.",
)  # fmt: skip
DEBERTA_IN_GRAPH_ATTENTION = _setting(
    "VLLM_FACTORY_DEBERTA_IN_GRAPH_ATTENTION", True, parse_flag,
    "DeBERTa encoders attend inside their compiled graph (the kernels' attention by rows) on a "
    "CUDA engine with Triton. Off, the former default, makes the attention a split point of "
    "the graph; kept one release, with a deprecation line.",
)  # fmt: skip
MODERNBERT_IN_GRAPH_ATTENTION = _setting(
    "VLLM_FACTORY_MODERNBERT_IN_GRAPH_ATTENTION", True, parse_flag,
    "ModernBERT encoders attend inside their compiled graph on a CUDA engine with Triton. Off, "
    "the former default, uses vLLM's attention; kept one release, with a deprecation line.",
)  # fmt: skip
MT5_IN_GRAPH_ATTENTION = _setting(
    "VLLM_FACTORY_MT5_IN_GRAPH_ATTENTION", True, parse_flag,
    "mT5 encoders attend inside their compiled graph on a CUDA engine with Triton. Off, the "
    "former default, makes the attention a split point; kept one release, with a deprecation "
    "line.",
)  # fmt: skip
GLINER_ROW_BUCKETS = _setting(
    "VLLM_FACTORY_GLINER_ROW_BUCKETS", None, parse_flag,
    "The GLiNER head's matrix products take their rows padded up to a few sizes (fewer new "
    "shapes for cuBLAS to choose kernels for). Unset: on a GPU; on: on every device (the CPU "
    "tests run the GPU's path with it); off: nowhere.",
)  # fmt: skip
GLINER_SPAN_GRAPHS = _setting(
    "VLLM_FACTORY_GLINER_SPAN_GRAPHS", None, parse_flag,
    "The GLiNER head's span scoring replayed from a CUDA graph per row bucket. Unset: on a "
    "GPU; on: also its fixed-shape path on the CPU (tests); off: scored eagerly.",
)  # fmt: skip
GLINER_SPAN_KERNEL = _setting(
    "VLLM_FACTORY_GLINER_SPAN_KERNEL", True, parse_flag,
    "The GLiNER head's folded span scoring through the kernels' span_logits (Triton on a GPU); "
    "off keeps embedding_bag and addmm.",
)  # fmt: skip
GLINER_LSTM_GRAPHS = _setting(
    "VLLM_FACTORY_GLINER_LSTM_GRAPHS", True, parse_flag,
    "A GPU GLiNER head's word BiLSTM replayed from CUDA graphs (off, or --enforce-eager: cuDNN "
    "eagerly).",
)  # fmt: skip
GLINER_LSTM_KERNEL = _setting(
    "VLLM_FACTORY_GLINER_LSTM_KERNEL", "steps", parse_lstm_kernel,
    "What a 16-bit GPU GLiNER head's BiLSTM graphs hold: steps (the kernels' per-step "
    "recurrence, one launch a word for both directions) or cudnn (cuDNN's cell).",
)  # fmt: skip
GLINER_LSTM_TWO_STREAMS = _setting(
    "VLLM_FACTORY_GLINER_LSTM_TWO_STREAMS", False, parse_flag,
    "Opt-in, not yet measured: the BiLSTM graphs run the two directions on two streams.",
)  # fmt: skip
GLINER_LABEL_CACHE = _setting(
    "VLLM_FACTORY_GLINER_LABEL_CACHE", 32768, parse_non_negative_int,
    "Label vectors a GLiNER bi-encoder keeps (least recently used dropped); 0 turns the cache "
    "off.",
)  # fmt: skip
STATS_DIR = _setting(
    "VLLM_FACTORY_STATS_DIR", "", parse_text,
    "Set by a server for the processes it starts: the folder where engine processes publish "
    "counters (the label cache's) for the API process's /metrics. Not for operators.",
)  # fmt: skip


@functools.cache
def say_former_default(setting: Setting[bool]) -> None:
    """One deprecation line for a switch set off where off is a former default."""
    logger.warning(
        "%s=0 keeps a former default; it goes in the next release (unset it for the current "
        "one)", setting.name,
    )  # fmt: skip


def check_all() -> None:
    """Read every setting once: a value that cannot be parsed stops the caller (a server's
    start-up) with one line naming the variable, before anything reads it mid-request."""
    for setting in REGISTRY.values():
        get(setting)


def describe() -> str:
    """Every setting: name, default, meaning (``python -m vllm_factory.core.envs``)."""
    lines = []
    for setting in REGISTRY.values():
        default = setting.default
        if isinstance(default, tuple):
            default = ",".join(default)
        elif default is None:
            default = "unset: by device"
        elif default == "":
            default = "unset"
        lines.append(f"{setting.name} (default {default})\n    {setting.doc}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
