"""What a sentence-transformers EmbeddingGemma checkpoint declares, read from its own files.

Pure Python (no vLLM, no torch): the IOProcessor (API process) and the model (engine
process) both read the same settings. Layout of such a checkpoint::

    modules.json                      Transformer -> Pooling -> Dense -> Dense -> Normalize
    config_sentence_transformers.json prompts, default_prompt_name
    sentence_bert_config.json         max_seq_length
    1_Pooling/config.json             mean pooling, include_prompt
    2_Dense/, 3_Dense/                config.json + model.safetensors (nn.Linear, no bias)
    4_Normalize/                      (no files)

Matryoshka dimensions have no standard place in a sentence-transformers checkpoint (the
EmbeddingGemma model card lists 768, 512, 256 and 128 in prose). We read them from
``matryoshka_dimensions`` in ``config.json``, the key vLLM's own embedding models use (also
settable with ``--hf-overrides``), then from the same key in
``config_sentence_transformers.json``; without either, the model card's list is used, cut to
the sizes below the checkpoint's output dimension.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.core.sentence_transformers import DenseFormatError, DenseSpec, read_dense

logger = logging.getLogger(__name__)

# From the EmbeddingGemma model card: the sizes it was trained to be truncated to.
MODEL_CARD_MATRYOSHKA_DIMS: tuple[int, ...] = (768, 512, 256, 128)


class CheckpointFormatError(ValueError):
    """The checkpoint uses a sentence-transformers feature this package does not serve."""


@dataclass(frozen=True)
class EmbeddingGemmaSettings:
    prompts: dict[str, str]
    default_prompt_name: str | None
    max_seq_length: int | None
    include_prompt: bool
    dense: tuple[DenseSpec, ...]
    normalize: bool
    dimension: int
    matryoshka_dims: tuple[int, ...] = field(default=())

    def prompt_text(self, name: str | None) -> str:
        """The text prepended for ``name`` (None: the default prompt, if any)."""
        name = name if name is not None else self.default_prompt_name
        if name is None:
            return ""
        return self.prompts[name]


def _pooling_modes(config: dict[str, Any]) -> list[str]:
    """Pooling modes from either the current (``pooling_mode``) or legacy (bool keys) layout."""
    mode = config.get("pooling_mode")
    if mode is not None:
        return [mode] if isinstance(mode, str) else list(mode)
    legacy = {
        "pooling_mode_cls_token": "cls",
        "pooling_mode_max_tokens": "max",
        "pooling_mode_mean_tokens": "mean",
        "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
        "pooling_mode_weightedmean_tokens": "weightedmean",
        "pooling_mode_lasttoken": "lasttoken",
    }
    return [name for key, name in legacy.items() if config.get(key)]


def _dense_spec(files: CheckpointFiles, folder: str) -> DenseSpec:
    """sentence-transformers' Dense (core's shared reader: identity or tanh, Tanh by default)."""
    try:
        return read_dense(files, folder)
    except DenseFormatError as error:
        raise CheckpointFormatError(str(error)) from error


def declared_matryoshka_dims(
    files: CheckpointFiles, dimension: int, hf_config_dims: Sequence[int] | None = None
) -> tuple[int, ...]:
    """The truncation sizes a request may ask for (always including the full dimension)."""
    st_config = files.json("config_sentence_transformers.json") or {}
    declared = hf_config_dims or st_config.get("matryoshka_dimensions")
    if declared:
        dims = {int(d) for d in declared}
    else:
        dims = {d for d in MODEL_CARD_MATRYOSHKA_DIMS if d < dimension}
    bad = sorted(d for d in dims if not 1 <= d <= dimension)
    if bad:
        raise CheckpointFormatError(f"matryoshka dimensions {bad} outside [1, {dimension}]")
    return tuple(sorted(dims | {dimension}, reverse=True))


def read_settings(
    files: CheckpointFiles, hidden_size: int, hf_config_dims: Sequence[int] | None = None
) -> EmbeddingGemmaSettings:
    """Read and check the sentence-transformers pipeline of an EmbeddingGemma checkpoint."""
    modules = files.json("modules.json")
    if not modules:
        raise CheckpointFormatError(
            "modules.json is missing: serve a sentence-transformers EmbeddingGemma checkpoint"
        )
    include_prompt, saw_pooling, normalize = True, False, False
    dense: list[DenseSpec] = []
    for index, module in enumerate(sorted(modules, key=lambda m: int(m.get("idx", 0)))):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        folder = module.get("path", "")
        if kind == "Transformer":
            if index != 0:
                raise CheckpointFormatError("the Transformer must be the first module")
        elif kind == "Pooling":
            config = files.json(f"{folder}/config.json") or {}
            modes = _pooling_modes(config)
            if modes != ["mean"]:
                raise CheckpointFormatError(f"only mean pooling is supported, found {modes}")
            include_prompt = bool(config.get("include_prompt", True))
            if not include_prompt:
                # EmbeddingGemma pools over its prompt tokens; excluding them is not served yet.
                raise CheckpointFormatError("Pooling with include_prompt=false is not supported")
            saw_pooling = True
        elif kind == "Dense":
            if not saw_pooling or normalize:
                raise CheckpointFormatError("Dense modules must follow Pooling, before Normalize")
            dense.append(_dense_spec(files, folder))
        elif kind == "Normalize":
            normalize = True
        else:
            raise CheckpointFormatError(f"unsupported sentence-transformers module {kind!r}")
    if not saw_pooling:
        raise CheckpointFormatError("modules.json has no Pooling module")
    width = hidden_size
    for spec in dense:
        if spec.in_features != width:
            raise CheckpointFormatError(
                f"{spec.folder.name}: in_features {spec.in_features}, expected {width}"
            )
        width = spec.out_features

    st_config = files.json("config_sentence_transformers.json") or {}
    prompts = {str(k): str(v) for k, v in (st_config.get("prompts") or {}).items()}
    default_prompt_name = st_config.get("default_prompt_name") or None
    if default_prompt_name is not None and default_prompt_name not in prompts:
        raise CheckpointFormatError(f"default_prompt_name {default_prompt_name!r} has no prompt")
    sbert = files.json("sentence_bert_config.json") or {}
    max_seq_length = sbert.get("max_seq_length")
    return EmbeddingGemmaSettings(
        prompts=prompts,
        default_prompt_name=default_prompt_name,
        max_seq_length=int(max_seq_length) if max_seq_length else None,
        include_prompt=include_prompt,
        dense=tuple(dense),
        normalize=normalize,
        dimension=width,
        matryoshka_dims=declared_matryoshka_dims(files, width, hf_config_dims),
    )
