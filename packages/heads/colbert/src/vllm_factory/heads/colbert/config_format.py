"""``--config-format colbert``: serve a PyLate or sentence-transformers ColBERT directory as the
library saved it, with no ``--hf-overrides`` and no ``--io-processor-plugin``:

    vllm serve COLBERT_DIR --runner pooling --config-format colbert

Such a directory's ``config.json`` names the plain backbone (``ModernBertModel``, ``Lfm2Model``),
which would load vLLM's own class. This parser serves the same config with our architecture
and IOProcessor for that backbone, taken from the installed ColBERT model packages (each
declares ``COLBERT_BACKBONE_TYPES``). The checkpoint's ColBERT settings are read (and refused
where they cannot be reproduced) before the engine starts. Every ColBERT model package
registers it from its general plugin.
"""

from __future__ import annotations

from typing import Any

from vllm_factory.core import config_format as core_config_format
from vllm_factory.core.config_format import Target
from vllm_factory.heads.colbert.settings import read_colbert_settings

CONFIG_FORMAT = "colbert"
TARGETS_ATTRIBUTE = "COLBERT_BACKBONE_TYPES"


def served_config(
    model: str, revision: str | None = None, targets: dict[str, Target] | None = None
) -> dict[str, Any]:
    """The config dict vLLM serves ColBERT checkpoint ``model`` (dir or hub id) with."""
    # A ColBERT checkpoint, and one we can serve exactly.
    return core_config_format.served_with_target(
        model, revision, config_format=CONFIG_FORMAT, attribute=TARGETS_ATTRIBUTE,
        family="ColBERT", targets=targets, check=read_colbert_settings,
    )  # fmt: skip


def register_config_format() -> None:
    """Register the ``colbert`` config format with vLLM once per process."""
    core_config_format.register_config_format(CONFIG_FORMAT, served_config)
