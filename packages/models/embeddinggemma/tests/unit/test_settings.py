"""Reading a sentence-transformers EmbeddingGemma layout (no vLLM, no weights needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.models.embeddinggemma.settings import (
    MODEL_CARD_MATRYOSHKA_DIMS,
    CheckpointFormatError,
    read_settings,
)

IDENTITY = "torch.nn.modules.linear.Identity"


def write_checkpoint(
    root: Path,
    *,
    pooling: dict | None = None,
    dense: tuple[tuple[int, int], ...] = ((16, 32), (32, 8)),
    normalize: bool = True,
    st_config: dict | None = None,
    sbert: dict | None = None,
    extra_modules: tuple[dict, ...] = (),
) -> CheckpointFiles:
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.Transformer"}]
    modules.append({"idx": 1, "name": "1", "path": "1_Pooling", "type": "x.Pooling"})
    (root / "1_Pooling").mkdir(parents=True)
    pooling = (
        pooling if pooling is not None else {"embedding_dimension": 16, "pooling_mode": "mean"}
    )
    (root / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    for i, (fan_in, fan_out) in enumerate(dense, start=2):
        folder = root / f"{i}_Dense"
        folder.mkdir()
        config = {"in_features": fan_in, "out_features": fan_out, "bias": False,
                  "activation_function": IDENTITY}  # fmt: skip
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "model.safetensors").write_bytes(b"")
        modules.append({"idx": i, "name": str(i), "path": folder.name, "type": "x.Dense"})
    if normalize:
        modules.append({"idx": 9, "name": "9", "path": "9_Normalize", "type": "x.Normalize"})
    modules += list(extra_modules)
    (root / "modules.json").write_text(json.dumps(modules))
    if st_config is not None:
        (root / "config_sentence_transformers.json").write_text(json.dumps(st_config))
    if sbert is not None:
        (root / "sentence_bert_config.json").write_text(json.dumps(sbert))
    return CheckpointFiles(str(root))


def test_embeddinggemma_layout(tmp_path):
    files = write_checkpoint(
        tmp_path,
        st_config={"prompts": {"query": "q: ", "document": "d: "}, "default_prompt_name": None},
        sbert={"max_seq_length": 64},
    )
    settings = read_settings(files, hidden_size=16, hf_config_dims=[8, 4])
    assert settings.prompts == {"query": "q: ", "document": "d: "}
    assert settings.prompt_text("query") == "q: " and settings.prompt_text(None) == ""
    assert [(d.in_features, d.out_features) for d in settings.dense] == [(16, 32), (32, 8)]
    assert settings.normalize and settings.dimension == 8 and settings.max_seq_length == 64
    assert settings.matryoshka_dims == (8, 4)


def test_legacy_pooling_keys_and_default_prompt(tmp_path):
    pooling = {"word_embedding_dimension": 16, "pooling_mode_mean_tokens": True,
               "pooling_mode_cls_token": False, "include_prompt": True}  # fmt: skip
    st_config = {"prompts": {"query": "q: "}, "default_prompt_name": "query"}
    files = write_checkpoint(tmp_path, pooling=pooling, st_config=st_config)
    settings = read_settings(files, hidden_size=16)
    assert settings.prompt_text(None) == "q: "


def test_matryoshka_dims_precedence(tmp_path):
    files = write_checkpoint(
        tmp_path, dense=((16, 768),), st_config={"matryoshka_dimensions": [512, 256]}
    )
    assert read_settings(files, 16).matryoshka_dims == (768, 512, 256)
    assert read_settings(files, 16, hf_config_dims=[128]).matryoshka_dims == (768, 128)


def test_matryoshka_dims_default_to_the_model_card(tmp_path):
    files = write_checkpoint(tmp_path, dense=((16, 768),))
    assert read_settings(files, 16).matryoshka_dims == MODEL_CARD_MATRYOSHKA_DIMS
    small = write_checkpoint(tmp_path / "small", dense=((16, 300),))
    assert read_settings(small, 16).matryoshka_dims == (300, 256, 128)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"pooling": {"pooling_mode": "cls"}}, "mean pooling"),
        ({"pooling": {"pooling_mode": "mean", "include_prompt": False}}, "include_prompt"),
        ({"dense": ((12, 8),)}, "in_features"),
        ({"extra_modules": ({"idx": 10, "path": "", "type": "x.LayerNorm"},)}, "LayerNorm"),
        ({"st_config": {"prompts": {}, "default_prompt_name": "query"}}, "default_prompt_name"),
        ({"st_config": {"matryoshka_dimensions": [4096]}}, "outside"),
    ],
)
def test_unsupported_checkpoints_are_refused(tmp_path, kwargs, message):
    files = write_checkpoint(tmp_path, **kwargs)
    with pytest.raises(CheckpointFormatError, match=message):
        read_settings(files, hidden_size=16)


def test_missing_modules_json_is_refused(tmp_path):
    with pytest.raises(CheckpointFormatError, match="modules.json"):
        read_settings(CheckpointFiles(str(tmp_path)), hidden_size=16)
