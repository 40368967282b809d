"""A gliner checkpoint directory as gliner saves it (config, weights, tokenizer files), for the
prep tests."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file


def write_gliner_dir(path: Path, gliner_config: dict, tokenizer_config: str = "{}") -> Path:
    path.mkdir()
    (path / "gliner_config.json").write_text(json.dumps(gliner_config))
    save_file({"prompt_rep_layer.0.weight": torch.zeros(2, 2)}, path / "model.safetensors")
    (path / "tokenizer_config.json").write_text(tokenizer_config)
    (path / "tokenizer.json").write_text("{}")
    return path
