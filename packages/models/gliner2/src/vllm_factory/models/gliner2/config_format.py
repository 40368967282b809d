"""``--config-format gliner2``: serve a GLiNER2 directory as the library saved it.

The library's ``config.json`` is its own ``ExtractorConfig`` (``model_type`` "extractor"), which
vLLM cannot read; the encoder's config lies in ``encoder_config/config.json``. This parser
serves the encoder's config with our architecture and IOProcessor, so that

    vllm serve GLINER2_DIR --runner pooling --config-format gliner2

needs no prep step. Settings the server cannot reproduce (the boundary architecture, another
counting layer) stop the start-up here, naming file and key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_factory.core import config_format as core_config_format
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.models.gliner2.settings import (
    CONFIG_FILE,
    ENCODER_CONFIG_FILE,
    PREPARED_CONFIG_FILE,
    parse_settings,
)

CONFIG_FORMAT = "gliner2"
TARGETS_ATTRIBUTE = "GLINER2_ENCODER_TYPES"


def served_config(model: str | Path, revision: str | None = None) -> dict[str, Any]:
    files = CheckpointFiles(str(model), revision)
    config = files.json(PREPARED_CONFIG_FILE) or files.json(CONFIG_FILE)
    encoder = files.json(ENCODER_CONFIG_FILE)
    if config is None or encoder is None:
        raise ValueError(
            f"--config-format {CONFIG_FORMAT}: {model} has no {CONFIG_FILE} and "
            f"{ENCODER_CONFIG_FILE} (not a GLiNER2 directory)"
        )
    try:
        settings = parse_settings(config, encoder)
        target = core_config_format.target_for(
            settings.encoder_model_type,
            core_config_format.installed_targets(TARGETS_ATTRIBUTE),
            "GLiNER2",
        )
    except (ValueError, LookupError) as error:
        raise ValueError(f"{model}: {error}") from None
    served = dict(encoder)
    served.pop("_name_or_path", None)
    served["architectures"] = [target.architecture]
    served["io_processor_plugin"] = target.io_processor
    return served


def register_config_format() -> None:
    core_config_format.register_config_format(CONFIG_FORMAT, served_config)
