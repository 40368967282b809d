"""PyLate's ColBERT settings, read from the checkpoint's own files.

PyLate stores them in ``config_sentence_transformers.json``; the projection lives in the
``Dense`` module folders listed in ``modules.json``. Defaults are PyLate's own, so a
checkpoint that omits a key behaves as it does in PyLate.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path

from vllm_factory.core.checkpoint import CheckpointFiles

DENSE_TYPES = ("Dense",)  # pylate.models.Dense.Dense, sentence_transformers...Dense
IDENTITY_ACTIVATIONS = ("Identity", "torch.nn.modules.linear.Identity", None)


@dataclass(frozen=True)
class DenseSpec:
    folder: Path
    in_features: int
    out_features: int
    bias: bool


@dataclass(frozen=True)
class ColBERTSettings:
    query_prefix: str = "[Q] "
    document_prefix: str = "[D] "
    query_length: int = 32
    document_length: int = 180
    do_query_expansion: bool = True
    attend_to_expansion_tokens: bool = False
    skiplist_words: tuple[str, ...] = tuple(string.punctuation)
    do_lower_case: bool = False
    dense: tuple[DenseSpec, ...] = field(default_factory=tuple)

    @property
    def hides_expansion_keys(self) -> bool:
        """Expansion tokens get attention_mask 0 in PyLate: no token may attend to them."""
        return self.do_query_expansion and not self.attend_to_expansion_tokens


def _dense_modules(files: CheckpointFiles) -> tuple[DenseSpec, ...]:
    modules = files.json("modules.json") or []
    specs = []
    for module in modules:
        if not str(module.get("type", "")).endswith(DENSE_TYPES):
            continue
        folder_name = module.get("path", "")
        config = files.json(f"{folder_name}/config.json")
        if config is None:
            raise ValueError(f"{files.model}: {folder_name}/config.json is missing")
        activation = config.get("activation_function")
        if activation not in IDENTITY_ACTIVATIONS and not str(activation).endswith("Identity"):
            raise ValueError(f"{files.model}: Dense activation {activation!r} is not supported")
        folder = files.folder(folder_name, ("model.safetensors", "pytorch_model.bin"))
        if folder is None:
            raise ValueError(f"{files.model}: no weights in {folder_name}/")
        specs.append(
            DenseSpec(
                folder=folder,
                in_features=int(config["in_features"]),
                out_features=int(config["out_features"]),
                bias=bool(config.get("bias", True)),
            )
        )
    return tuple(specs)


def read_colbert_settings(files: CheckpointFiles) -> ColBERTSettings:
    st_config = files.json("config_sentence_transformers.json") or {}
    bert_config = files.json("sentence_bert_config.json") or {}
    defaults = ColBERTSettings()

    def pick(key: str, default):
        value = st_config.get(key)
        return default if value is None else value

    skiplist = pick("skiplist_words", list(defaults.skiplist_words))
    do_expansion = bool(pick("do_query_expansion", defaults.do_query_expansion))
    attend = bool(pick("attend_to_expansion_tokens", defaults.attend_to_expansion_tokens))
    return ColBERTSettings(
        query_prefix=pick("query_prefix", defaults.query_prefix),
        document_prefix=pick("document_prefix", defaults.document_prefix),
        query_length=int(pick("query_length", defaults.query_length)),
        document_length=int(pick("document_length", defaults.document_length)),
        do_query_expansion=do_expansion,
        # PyLate: without expansion there is nothing to attend to.
        attend_to_expansion_tokens=attend and do_expansion,
        skiplist_words=tuple(skiplist),
        do_lower_case=bool(bert_config.get("do_lower_case", False)),
        dense=_dense_modules(files),
    )
