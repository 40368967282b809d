"""Reading a checkpoint's own files (sentence-transformers configs, module folders).

Works for a local directory and for a hub id (through the local Hugging Face cache, so
``HF_HUB_OFFLINE=1`` keeps working once the files are cached).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


class CheckpointFiles:
    def __init__(self, model: str, revision: str | None = None) -> None:
        self.model = model
        self.revision = revision
        self.local_dir = Path(model) if os.path.isdir(model) else None

    def path(self, filename: str) -> Path | None:
        """Local path of ``filename`` inside the checkpoint, or None if it has none."""
        if self.local_dir is not None:
            candidate = self.local_dir / filename
            return candidate if candidate.exists() else None
        try:
            from huggingface_hub import hf_hub_download

            return Path(hf_hub_download(self.model, filename, revision=self.revision))
        except Exception as error:  # noqa: BLE001 - hub errors vary by version; absent is absent
            logger.debug("%s has no %s: %s", self.model, filename, error)
            return None

    def tokenizer(self, **options: Any) -> Any:
        """The checkpoint's tokenizer (transformers' ``AutoTokenizer`` at its revision, never
        the checkpoint's remote code; ``options``: e.g. ``subfolder``). transformers comes with
        vLLM, which every IOProcessor runs in."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(
            self.model, revision=self.revision, trust_remote_code=False, **options
        )

    def json(self, filename: str) -> dict[str, Any] | None:
        path = self.path(filename)
        if path is None:
            return None
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)

    def folder(self, name: str, files: tuple[str, ...]) -> Path | None:
        """A module folder (e.g. ``1_Dense``) with the given files materialised locally."""
        paths = [self.path(f"{name}/{file}") for file in files]
        found = [p for p in paths if p is not None]
        return found[0].parent if found else None
