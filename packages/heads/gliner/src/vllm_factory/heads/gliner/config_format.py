"""``--config-format gliner``: serve a gliner checkpoint directory as gliner saved it.

A gliner directory has ``gliner_config.json`` but no ``config.json``, so vLLM's own config
detection fails on it. This parser builds in memory the config that ``vllm-factory-prep``
would write (the encoder's config from ``gliner_config.json`` plus our architecture and
IOProcessor), so that

    vllm serve GLINER_DIR --runner pooling --config-format gliner

needs no prep step. Every GLiNER model package registers it from its general plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_factory.core import config_format as core_config_format
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.heads.gliner.prep import PrepError, Target, build_config, find_target
from vllm_factory.heads.gliner.settings import CONFIG_FILE, parse_settings

CONFIG_FORMAT = "gliner"


def served_config(
    model: str | Path, revision: str | None = None, targets: dict[str, Target] | None = None
) -> dict[str, Any]:
    """The ``config.json`` dict vLLM needs for gliner checkpoint ``model`` (dir or hub id);
    ``targets`` defaults to the installed GLiNER model packages."""
    gliner_config = CheckpointFiles(str(model), revision).json(CONFIG_FILE)
    if gliner_config is None:
        raise ValueError(f"--config-format {CONFIG_FORMAT}: {model} has no {CONFIG_FILE}")
    try:
        target = find_target(parse_settings(gliner_config).encoder_model_type, targets)
    except (ValueError, PrepError) as error:
        raise ValueError(f"{model}/{CONFIG_FILE}: {error}") from None
    return build_config(gliner_config, target)


def register_config_format() -> None:
    """Register the ``gliner`` config format with vLLM once per process."""
    core_config_format.register_config_format(CONFIG_FORMAT, served_config)
