"""What a GLiNER2 checkpoint directory says about its heads (pure Python, no vLLM).

The library saves ``config.json`` (its ``ExtractorConfig``: ``model_type`` "extractor",
``architecture``, ``span_head.max_width`` or a legacy top-level ``max_width``,
``counting_layer``, ``token_pooling``) and ``encoder_config/config.json`` (the encoder's
Hugging Face config). A directory written by ``vllm-factory-prep`` keeps the library's
``config.json`` as ``gliner2_config.json`` (its ``config.json`` is then the served one).
Settings this server cannot reproduce are refused at start-up, naming the file and key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONFIG_FILE = "config.json"
ENCODER_CONFIG_FILE = "encoder_config/config.json"
# The library's config.json in a prepared directory.
PREPARED_CONFIG_FILE = "gliner2_config.json"


@dataclass(frozen=True)
class GLiNER2Settings:
    max_width: int
    hidden_size: int
    encoder_model_type: str


def parse_settings(config: dict[str, Any], encoder_config: dict[str, Any]) -> GLiNER2Settings:
    where = CONFIG_FILE
    architecture = config.get("architecture") or "span"
    if architecture != "span":
        raise ValueError(
            f"{where}: architecture {architecture!r} is not served; vllm-factory-gliner2 serves "
            "the span architecture (the published GLiNER2 models) only"
        )
    span_head = config.get("span_head") or {}
    max_width = span_head.get("max_width", config.get("max_width", 8))
    if span_head.get("span_mode", "markerV0") != "markerV0":
        raise ValueError(f"{where}: span_head.span_mode must be 'markerV0'")
    counting = config.get("counting_layer") or "count_lstm"
    if counting != "count_lstm":
        raise ValueError(f"{where}: counting_layer {counting!r} is not served (count_lstm only)")
    pooling = config.get("token_pooling") or "first"
    if pooling != "first":
        raise ValueError(f"{where}: token_pooling {pooling!r} is not served ('first' only)")
    if not isinstance(max_width, int) or max_width < 1:
        raise ValueError(f"{where}: max_width must be a positive integer")
    return GLiNER2Settings(
        max_width=max_width,
        hidden_size=int(encoder_config["hidden_size"]),
        encoder_model_type=str(encoder_config.get("model_type", "")),
    )


def read_settings(files: Any) -> GLiNER2Settings:
    """Settings from a ``CheckpointFiles`` (local dir or hub id)."""
    config = files.json(PREPARED_CONFIG_FILE) or files.json(CONFIG_FILE)
    encoder = files.json(ENCODER_CONFIG_FILE)
    if config is None or encoder is None:
        raise ValueError(
            f"{files.model}: not a GLiNER2 directory (needs {CONFIG_FILE} and {ENCODER_CONFIG_FILE})"
        )
    return parse_settings(config, encoder)
