"""``--config-format colpali``: serve a colpali-engine checkpoint directory as the library saved
it, with no ``--hf-overrides`` and no ``--io-processor-plugin``:

    vllm serve COLPALI_DIR --runner pooling --config-format colpali

Such a ``config.json`` names the library's class (``ColQwen3``), which vLLM would serve with
its own model. This parser serves the same config with our architecture and IOProcessor for that
backbone, taken from the installed ColPali model packages (each declares
``COLPALI_BACKBONE_TYPES``). Every ColPali model package registers it from its general plugin.
"""

from __future__ import annotations

from typing import Any

from vllm_factory.core import config_format as core_config_format
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.core.config_format import Target, installed_targets, target_for

CONFIG_FORMAT = "colpali"
TARGETS_ATTRIBUTE = "COLPALI_BACKBONE_TYPES"


def served_config(
    model: str, revision: str | None = None, targets: dict[str, Target] | None = None
) -> dict[str, Any]:
    """The config dict vLLM serves ColPali checkpoint ``model`` (dir or hub id) with."""
    config = CheckpointFiles(model, revision).json("config.json")
    if config is None:
        raise ValueError(f"--config-format {CONFIG_FORMAT}: {model} has no config.json")
    known = installed_targets(TARGETS_ATTRIBUTE) if targets is None else targets
    try:
        target = target_for(config.get("model_type"), known, "ColPali")
    except LookupError as error:
        raise ValueError(f"{model}/config.json: {error}") from None
    return {
        **config,
        "architectures": [target.architecture],
        "io_processor_plugin": target.io_processor,
    }


def register_config_format() -> None:
    """Register the ``colpali`` config format with vLLM once per process."""
    core_config_format.register_config_format(CONFIG_FORMAT, served_config)
