"""GLiNER2 directories for ``vllm-factory-prep`` (the GLiNER head's command; this package
registers itself under the ``vllm_factory.prep`` entry points):

    vllm-factory-prep --model GLINER2_DIR --output OUT_DIR && vllm serve OUT_DIR --runner pooling

OUT_DIR holds the library's files as they are, except ``config.json``: there, the config that
``--config-format gliner2`` serves (the encoder's, with our architecture and IOProcessor), so
that no flag selects them; the library's own ``config.json`` moves to ``gliner2_config.json``,
where the server reads its head settings.

A gliner2 LoRA adapter in the library's legacy layout (``adapter_weights.safetensors``) is
converted to PEFT's layout instead, which ``--lora-modules`` reads (:mod:`.adapters`).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from vllm_factory.heads.gliner.prep import PrepError, copy_with_progress
from vllm_factory.models.gliner2.adapters import (
    AdapterError,
    convert_legacy_adapter,
    is_legacy_adapter,
)
from vllm_factory.models.gliner2.config_format import served_config
from vllm_factory.models.gliner2.settings import (
    CONFIG_FILE,
    ENCODER_CONFIG_FILE,
    PREPARED_CONFIG_FILE,
)

logger = logging.getLogger("vllm_factory.prep")


class GLiNER2Preparer:
    """What ``vllm-factory-prep`` calls for a GLiNER2 directory."""

    def recognizes(self, source: Path) -> bool:
        library = (source / CONFIG_FILE).is_file() and (source / ENCODER_CONFIG_FILE).is_file()
        return library or is_legacy_adapter(source)

    def prepare(self, source: Path, out: Path, *, force: bool = False) -> Path:
        if is_legacy_adapter(source):
            self._check_output(source, out, force)
            try:
                return convert_legacy_adapter(source, out)
            except AdapterError as error:
                raise PrepError(f"{source}: {error}") from None
        try:
            served = served_config(str(source))
        except ValueError as error:
            raise PrepError(str(error)) from None
        self._check_output(source, out, force)
        out.mkdir(parents=True, exist_ok=True)
        for path in sorted(source.rglob("*")):
            target = out / path.relative_to(source)
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            elif path == source / CONFIG_FILE:
                shutil.copyfile(path, out / PREPARED_CONFIG_FILE)
            elif not path.name.startswith("."):
                copy_with_progress(path, target)
        (out / CONFIG_FILE).write_text(
            json.dumps(served, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        logger.info(
            "prepared %s: architecture %s, IOProcessor %s",
            out, served["architectures"][0], served["io_processor_plugin"],
        )  # fmt: skip
        return out

    @staticmethod
    def _check_output(source: Path, out: Path, force: bool) -> None:
        if out.exists():
            if source.resolve() == out.resolve():
                raise PrepError("the output directory must differ from the input directory")
            if not force and any(out.iterdir()):
                raise PrepError(f"{out} exists and is not empty (use --force to overwrite)")


GLINER2 = GLiNER2Preparer()
