"""``--config-format colpali``: serve a colpali-engine checkpoint directory as the library saved
it, with no ``--hf-overrides`` and no ``--io-processor-plugin``:

    vllm serve COLPALI_DIR --runner pooling --config-format colpali

Such a ``config.json`` names the library's class (``ColQwen3``), which vLLM would serve with
its own model. This parser serves the same config with our architecture and IOProcessor for that
backbone, taken from the installed ColPali model packages (each declares
``COLPALI_BACKBONE_TYPES``). Every ColPali model package registers it from its general plugin.

A package may also declare ``COLPALI_CONFIG_UPDATE``: a dict merged into the served config
(nested dicts merged key by key, ``None`` removing a key), for a checkpoint whose
``config.json`` vLLM must read differently (NVIDIA's Nemotron ColEmbed: its remote
configuration class as transformers' own Qwen3-VL one, bidirectional attention).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from vllm_factory.core import config_format as core_config_format
from vllm_factory.core.config_format import Target
from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

CONFIG_FORMAT = "colpali"
TARGETS_ATTRIBUTE = "COLPALI_BACKBONE_TYPES"
UPDATE_ATTRIBUTE = "COLPALI_CONFIG_UPDATE"


def merged(config: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with ``update`` merged in: nested dicts key by key, ``None`` removes a key."""
    out = dict(config)
    for key, value in update.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def served_config(
    model: str, revision: str | None = None, targets: dict[str, Target] | None = None
) -> dict[str, Any]:
    """The config dict vLLM serves ColPali checkpoint ``model`` (dir or hub id) with."""
    config = core_config_format.served_with_target(
        model, revision, config_format=CONFIG_FORMAT, attribute=TARGETS_ATTRIBUTE,
        family="ColPali", targets=targets,
    )  # fmt: skip
    known = core_config_format.installed_targets(TARGETS_ATTRIBUTE) if targets is None else targets
    target = known[config["model_type"]]
    try:
        update = getattr(importlib.import_module(target.package), UPDATE_ATTRIBUTE, None)
    except ImportError:  # a target named in a test, not an installed package
        update = None
    return merged(config, update) if update else config


def register_config_format() -> None:
    """Register the ``colpali`` config format with vLLM once per process."""
    core_config_format.register_config_format(CONFIG_FORMAT, served_config)


def register_plugin_extras() -> None:
    """What a ColPali model package's general plugin does besides registering its architecture:
    ``--config-format colpali``, and transformers' PIL image processors for every Qwen-VL model
    of the process where torchvision does not load (CPU hosts; see image_processing)."""
    register_config_format()
    use_pil_image_processors()
