"""The encoder layers the kit's LoRA adapters target (the GLiNER and GLiNER2 LoRA suites;
stdlib only, as the reference modules that read it).

Per encoder ``model_type`` (the Hugging Face config's), the names of the encoder's linear
layers as PEFT matches them (the last part of a module's name): every projection, and the
attention's input ones alone (an adapter on fewer modules, at another rank). ModernBERT fuses
query, key and value in ``Wqkv`` and the GeGLU halves in ``Wi``: one layer each for PEFT.
mT5 / T5 (``T5EncoderModel``) has separate ``q``, ``k``, ``v``, ``o`` and a gated feed-forward
``wi_0`` / ``wi_1`` / ``wo`` (mT5 always; T5 per ``feed_forward_proj``, else one ``wi``: its
list names both forms, PEFT adapts those present).
"""

from __future__ import annotations

import json
from pathlib import Path

EVERY: dict[str, tuple[str, ...]] = {
    "deberta-v2": ("query_proj", "key_proj", "value_proj", "dense"),
    "modernbert": ("Wqkv", "Wo", "Wi"),
    "mt5": ("q", "k", "v", "o", "wi_0", "wi_1", "wo"),
    "t5": ("q", "k", "v", "o", "wi", "wi_0", "wi_1", "wo"),
}
ATTENTION_INPUTS: dict[str, tuple[str, ...]] = {
    "deberta-v2": ("query_proj", "value_proj"),
    "modernbert": ("Wqkv",),
    "mt5": ("q", "v"),
    "t5": ("q", "v"),
}


def model_type(config_file: Path, *keys: str) -> str:
    """The encoder's ``model_type`` in the JSON file ``config_file``, under ``keys`` (gliner's
    ``gliner_config.json``: ``encoder_config``); one the kit has targets for."""
    data = json.loads(config_file.read_text(encoding="utf-8"))
    for key in keys:
        data = data[key]
    kind = data["model_type"]
    if kind not in EVERY:
        raise ValueError(f"{config_file}: no LoRA targets for encoder model_type {kind!r}")
    return kind


def encoder_layers(config_file: Path, role: str, *keys: str) -> list[str]:
    """The layers of ``role`` (``every`` or ``attention``) for the encoder of
    :func:`model_type` ``(config_file, *keys)``."""
    kind = model_type(config_file, *keys)
    return list({"every": EVERY, "attention": ATTENTION_INPUTS}[role][kind])
