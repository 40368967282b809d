"""Serving a library's own checkpoint directory with no hand-written config:
``vllm serve DIR --runner pooling --config-format NAME``.

A family (GLiNER, ColBERT) registers a vLLM config parser that builds in memory the
``config.json`` vLLM needs: the backbone's Hugging Face config plus ``architectures`` (our model
class) and ``io_processor_plugin``. Which installed package serves which backbone comes from the
model packages themselves: each declares, in its package ``__init__`` (which never imports
vLLM), ``ARCHITECTURE``, ``IO_PROCESSOR`` and a tuple of backbone ``model_type`` values under
an attribute the family names (``GLINER_ENCODER_TYPES``, ``COLBERT_BACKBONE_TYPES``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from vllm_factory.core.checkpoint import CheckpointFiles

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    architecture: str
    io_processor: str
    package: str


def installed_targets(attribute: str) -> dict[str, Target]:
    """Backbone model_type -> target, from the installed vllm-factory model packages that
    declare ``attribute``; found through their IOProcessor entry points."""
    targets: dict[str, Target] = {}
    for ep in entry_points(group="vllm.io_processor_plugins"):
        module = ep.value.split(":")[0]
        if not module.startswith("vllm_factory.models."):
            continue
        package = module.rsplit(".", 1)[0]
        try:
            pkg = importlib.import_module(package)
        except Exception as error:  # noqa: BLE001 - a broken unrelated package must not stop us
            logger.debug("skipping %s: %s", package, error)
            continue
        for model_type in getattr(pkg, attribute, ()):
            targets[model_type] = Target(pkg.ARCHITECTURE, pkg.IO_PROCESSOR, package)
    return targets


def target_for(model_type: str, known: dict[str, Target], family: str) -> Target:
    """The target in ``known`` for backbone ``model_type``; ``LookupError`` naming the installed
    ones where none serves it (``family``: "GLiNER", "ColBERT", for the message)."""
    target = known.get(model_type)
    if target is None:
        have = ", ".join(f"{k} ({v.package})" for k, v in sorted(known.items())) or "none"
        raise LookupError(
            f"no installed vllm-factory {family} package serves backbone model_type "
            f"{model_type!r} (installed: {have})"
        )
    return target


def served_with_target(
    model: str,
    revision: str | None,
    *,
    config_format: str,
    attribute: str,
    family: str,
    targets: dict[str, Target] | None = None,
    check: Callable[[CheckpointFiles], object] | None = None,
) -> dict[str, Any]:
    """The checkpoint's own ``config.json`` served with the architecture and IOProcessor of the
    installed package that declares its ``model_type`` under ``attribute`` (``targets``: that
    mapping, for tests). ``check(files)`` runs first and raises where the checkpoint cannot be
    served exactly (a family's settings reader). ``ValueError`` naming the file otherwise."""
    files = CheckpointFiles(model, revision)
    config = files.json("config.json")
    if config is None:
        raise ValueError(f"--config-format {config_format}: {model} has no config.json")
    if check is not None:
        check(files)
    known = installed_targets(attribute) if targets is None else targets
    try:
        target = target_for(config.get("model_type"), known, family)
    except LookupError as error:
        raise ValueError(f"{model}/config.json: {error}") from None
    return {
        **config,
        "architectures": [target.architecture],
        "io_processor_plugin": target.io_processor,
    }


def register_config_format(name: str, served_config: Callable[[str, str | None], dict]) -> None:
    """Register ``--config-format name`` with vLLM, once per process. ``served_config(model,
    revision)`` returns the config dict to serve (raising ``ValueError`` with the reason)."""
    from transformers import AutoConfig
    from vllm.transformers_utils.config import get_config_parser, register_config_parser
    from vllm.transformers_utils.config_parser_base import ConfigParserBase

    try:
        get_config_parser(name)
        return  # another package of the family registered it already
    except ValueError:
        pass

    class FactoryConfigParser(ConfigParserBase):
        def parse(
            self,
            model: str | Path,
            trust_remote_code: bool,
            revision: str | None = None,
            code_revision: str | None = None,
            **kwargs: Any,
        ) -> tuple[dict, Any]:
            config_dict = served_config(str(model), revision)
            fields = {k: v for k, v in config_dict.items() if k != "model_type"}
            config = AutoConfig.for_model(config_dict["model_type"], **fields)
            logger.info(
                "%s: served as %s with IOProcessor %s (--config-format %s)",
                model, config_dict["architectures"][0], config_dict["io_processor_plugin"], name,
            )  # fmt: skip
            return config_dict, config

    FactoryConfigParser.__name__ = f"{name.capitalize()}ConfigParser"
    register_config_parser(name)(FactoryConfigParser)
