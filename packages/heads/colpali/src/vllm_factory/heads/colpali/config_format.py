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
from vllm_factory.core.config_format import Target

CONFIG_FORMAT = "colpali"
TARGETS_ATTRIBUTE = "COLPALI_BACKBONE_TYPES"


def served_config(
    model: str, revision: str | None = None, targets: dict[str, Target] | None = None
) -> dict[str, Any]:
    """The config dict vLLM serves ColPali checkpoint ``model`` (dir or hub id) with."""
    return core_config_format.served_with_target(
        model, revision, config_format=CONFIG_FORMAT, attribute=TARGETS_ATTRIBUTE,
        family="ColPali", targets=targets,
    )  # fmt: skip


def register_config_format() -> None:
    """Register the ``colpali`` config format with vLLM once per process."""
    core_config_format.register_config_format(CONFIG_FORMAT, served_config)
