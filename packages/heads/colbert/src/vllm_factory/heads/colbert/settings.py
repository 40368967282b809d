"""A ColBERT checkpoint's settings, read by the rules of the library that saved it.

Two on-disk layouts, told apart by ``config_sentence_transformers.json``'s ``model_type``:

- **PyLate** (``"ColBERT"``, or PyLate's keys without a model type): the ColBERT settings are
  keys of that file (``query_prefix``, ``query_length``, ``do_query_expansion``,
  ``skiplist_words`` ...), with PyLate's defaults for missing ones. The prefixes are *tokens*
  inserted after the first token; queries are expanded to ``query_length``; documents drop
  punctuation tokens from the output.
- **sentence-transformers** (``"MultiVectorEncoder"``): text ``prompts`` prepended before
  tokenization, lengths and ``query_expansion`` in the Transformer module's
  ``sentence_bert_config.json``, the skiplist in the ``MultiVectorMask`` module's config.

Whatever a checkpoint asks for that the plugin cannot reproduce is refused at start-up with the
file and key named (:class:`UnsupportedColBERTConfig`); nothing is guessed.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.core.sentence_transformers import (
    IDENTITY,
    DenseFormatError,
    DenseSpec,
    read_dense,
)

DENSE_TYPES = ("Dense",)  # pylate.models.Dense.Dense, sentence_transformers...Dense
ST_CONFIG = "config_sentence_transformers.json"
ST_MODULE_CONFIG = "sentence_bert_config.json"
PYLATE, SENTENCE_TRANSFORMERS = "pylate", "sentence-transformers"
TASKS = ("query", "document")


class UnsupportedColBERTConfig(ValueError):
    """The checkpoint asks for something this plugin cannot reproduce exactly."""


@dataclass(frozen=True)
class ColBERTSettings:
    layout: str = PYLATE
    # PyLate: prefix *tokens* inserted after the first token ("" = none).
    query_prefix: str = "[Q] "
    document_prefix: str = "[D] "
    # sentence-transformers: prompt *text* prepended to the input before tokenization.
    query_prompt: str = ""
    document_prompt: str = ""
    # Token limits per side (None: the tokenizer's own limit).
    query_length: int | None = 32
    document_length: int | None = 180
    do_query_expansion: bool = True
    # "fixed": queries are exactly expansion_length tokens; "min": at least that many.
    expansion_strategy: str = "fixed"
    expansion_length: int | None = None  # PyLate: query_length
    attend_to_expansion_tokens: bool = False
    skiplist_words: tuple[str, ...] = tuple(string.punctuation)
    skiplist_tasks: tuple[str, ...] = ("document",)
    # sentence-transformers drops skiplist words that are not single vocabulary tokens
    # (they would map to UNK); PyLate keeps the UNK id in its skiplist.
    skiplist_drops_unknown: bool = False
    do_lower_case: bool = False
    dense: tuple[DenseSpec, ...] = field(default_factory=tuple)

    @property
    def hides_expansion_keys(self) -> bool:
        """Expansion tokens get attention_mask 0: no token may attend to them."""
        return self.do_query_expansion and not self.attend_to_expansion_tokens


def _refuse(files: CheckpointFiles, filename: str, key: str, why: str) -> UnsupportedColBERTConfig:
    return UnsupportedColBERTConfig(f"{files.model}/{filename}: {key}: {why}")


def _dense_spec(files: CheckpointFiles, folder_name: str) -> DenseSpec:
    """PyLate and sentence-transformers multi-vector projections: identity Dense modules on
    the token embeddings (core's shared Dense reader; a missing activation is PyLate's)."""
    try:
        spec = read_dense(files, folder_name, default_activation=None)
    except DenseFormatError as error:
        raise UnsupportedColBERTConfig(f"{files.model}/{error}") from error
    path = f"{folder_name}/config.json"
    if spec.activation != IDENTITY:
        raise _refuse(files, path, "activation_function", f"{spec.activation} (identity only)")
    config = files.json(path)
    for key in ("module_input_name", "module_output_name"):
        if config.get(key, "token_embeddings") != "token_embeddings":
            raise _refuse(files, path, key, "must be token_embeddings")
    return spec


# -- PyLate ------------------------------------------------------------------------------------

# Keys of PyLate's config_sentence_transformers.json this reader takes (others are ignored:
# versions, model card data).
PYLATE_KEYS = (
    "query_prefix", "document_prefix", "query_length", "document_length", "do_query_expansion",
    "attend_to_expansion_tokens", "skiplist_words",
)  # fmt: skip


def _read_pylate(files: CheckpointFiles, st_config: dict[str, Any]) -> ColBERTSettings:
    bert_config = files.json(ST_MODULE_CONFIG) or {}
    defaults = ColBERTSettings()

    def pick(key: str, default):
        value = st_config.get(key)
        return default if value is None else value

    similarity = st_config.get("similarity_fn_name")
    if similarity not in (None, "MaxSim", "maxsim"):
        raise _refuse(files, ST_CONFIG, "similarity_fn_name", f"{similarity!r} is not MaxSim")
    if st_config.get("default_prompt_name"):
        raise _refuse(
            files, ST_CONFIG, "default_prompt_name", "prompts applied by default are not supported"
        )
    modules = files.json("modules.json") or []
    dense = []
    for module in modules:
        kind = str(module.get("type", ""))
        if kind.endswith(DENSE_TYPES):
            dense.append(_dense_spec(files, module.get("path", "")))
    query_length = int(pick("query_length", defaults.query_length))
    do_expansion = bool(pick("do_query_expansion", defaults.do_query_expansion))
    attend = bool(pick("attend_to_expansion_tokens", defaults.attend_to_expansion_tokens))
    return ColBERTSettings(
        layout=PYLATE,
        query_prefix=pick("query_prefix", defaults.query_prefix),
        document_prefix=pick("document_prefix", defaults.document_prefix),
        query_length=query_length,
        document_length=int(pick("document_length", defaults.document_length)),
        do_query_expansion=do_expansion,
        expansion_strategy="fixed",
        expansion_length=query_length,
        # PyLate: without expansion there is nothing to attend to.
        attend_to_expansion_tokens=attend and do_expansion,
        skiplist_words=tuple(pick("skiplist_words", list(defaults.skiplist_words))),
        skiplist_tasks=("document",),
        do_lower_case=bool(bert_config.get("do_lower_case", False)),
        dense=tuple(dense),
    )


# -- sentence-transformers MultiVectorEncoder -------------------------------------------------

TRANSFORMER_TYPE = "sentence_transformers.base.modules.transformer.Transformer"
MASK_TYPE = "MultiVectorMask"
NORMALIZE_TYPE = "Normalize"


def _st_prompt(files: CheckpointFiles, st_config: dict[str, Any], names: tuple[str, ...]) -> str:
    """The prompt ``encode_query`` / ``encode_document`` apply: the first of ``names`` in
    ``prompts``, else the ``default_prompt_name``'s, else none."""
    prompts = st_config.get("prompts") or {}
    for name in names:
        if name in prompts:
            return str(prompts[name] or "")
    default = st_config.get("default_prompt_name")
    if default:
        if default not in prompts:
            raise _refuse(files, ST_CONFIG, "default_prompt_name", f"{default!r} not in prompts")
        return str(prompts[default] or "")
    return ""


def _read_sentence_transformers(
    files: CheckpointFiles, st_config: dict[str, Any]
) -> ColBERTSettings:
    similarity = st_config.get("similarity_fn_name")
    if similarity not in (None, "maxsim", "MaxSim"):
        raise _refuse(files, ST_CONFIG, "similarity_fn_name", f"{similarity!r} is not MaxSim")
    modules = files.json("modules.json")
    if not modules:
        raise _refuse(files, "modules.json", "(file)", "missing or empty")
    transformer: dict[str, Any] | None = None
    mask: dict[str, Any] | None = None
    dense: list[DenseSpec] = []
    normalized = False
    for module in modules:
        kind, path = str(module.get("type", "")), str(module.get("path", ""))
        short = kind.rsplit(".", 1)[-1]
        if normalized and short != MASK_TYPE:
            raise _refuse(
                files, "modules.json", kind, "only MultiVectorMask may follow Normalize"
            )  # fmt: skip
        if short == "Transformer" and transformer is None and not dense:
            config_name = f"{path}/{ST_MODULE_CONFIG}" if path else ST_MODULE_CONFIG
            transformer = files.json(config_name) or {}
            transformer["__file__"] = config_name
        elif short in DENSE_TYPES and transformer is not None:
            dense.append(_dense_spec(files, path))
        elif short == MASK_TYPE:
            mask = files.json(f"{path}/config.json") or {}
            mask["__file__"] = f"{path}/config.json"
        elif short == NORMALIZE_TYPE:
            normalized = True
        else:
            raise _refuse(files, "modules.json", kind, "module not supported by this plugin")
    if transformer is None:
        raise _refuse(files, "modules.json", "Transformer", "no Transformer module first")
    if not normalized:
        raise _refuse(files, "modules.json", NORMALIZE_TYPE, "vectors must be L2-normalised")
    source = transformer.pop("__file__")
    if transformer.get("processing_kwargs"):
        raise _refuse(files, source, "processing_kwargs", "per-call tokenizer settings")
    if transformer.get("do_lower_case"):
        raise _refuse(files, source, "do_lower_case", "lower-casing normalizer")
    for key, wanted in (("transformer_task", "feature-extraction"),
                        ("module_output_name", "token_embeddings")):  # fmt: skip
        if transformer.get(key, wanted) != wanted:
            raise _refuse(files, source, key, f"{transformer[key]!r} (only {wanted!r})")
    modality = transformer.get("modality_config")
    if modality is not None and set(modality) != {"text"}:
        raise _refuse(files, source, "modality_config", "only the text modality is supported")
    expansion = transformer.get("query_expansion")
    if expansion is not None:
        strategy = expansion.get("strategy")
        if strategy not in ("fixed", "min"):
            raise _refuse(files, source, "query_expansion.strategy", f"{strategy!r}")
        length = expansion.get("length")
        if not isinstance(length, int) or length < 1:
            raise _refuse(files, source, "query_expansion.length", f"{length!r}")
        if expansion.get("token") is not None:
            # The served models find expansion tokens by the tokenizer's mask (else EOS) id.
            raise _refuse(
                files, source, "query_expansion.token",
                "only the default expansion token (the tokenizer's mask token, else EOS)",
            )  # fmt: skip
    if mask is None:
        if expansion is not None:  # without it, expansion positions are not scored
            raise _refuse(files, "modules.json", MASK_TYPE, "query expansion without the mask")
        mask = {"skiplist_words": []}
    mask_file = mask.get("__file__", "modules.json")
    if mask.get("keep_only_token_ids"):
        raise _refuse(files, mask_file, "keep_only_token_ids", "token allowlists")
    tasks = mask.get("skiplist_tasks", ["document"])
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    if not set(tasks) <= set(TASKS):
        raise _refuse(files, mask_file, "skiplist_tasks", f"{tasks!r} (query, document only)")

    def length(key: str) -> int | None:
        value = transformer.get(key)
        return None if value is None else int(value)

    return ColBERTSettings(
        layout=SENTENCE_TRANSFORMERS,
        query_prefix="",
        document_prefix="",
        query_prompt=_st_prompt(files, st_config, ("query",)),
        document_prompt=_st_prompt(files, st_config, ("document", "passage", "corpus")),
        query_length=length("query_length"),
        document_length=length("document_length"),
        do_query_expansion=expansion is not None,
        expansion_strategy=(expansion or {}).get("strategy", "fixed"),
        expansion_length=(expansion or {}).get("length"),
        attend_to_expansion_tokens=bool((expansion or {}).get("attend", False)),
        skiplist_words=tuple(mask.get("skiplist_words") or ()),
        skiplist_tasks=tuple(tasks),
        skiplist_drops_unknown=True,
        do_lower_case=False,
        dense=tuple(dense),
    )


def read_colbert_settings(files: CheckpointFiles) -> ColBERTSettings:
    """The settings of a PyLate or sentence-transformers multi-vector checkpoint."""
    st_config = files.json(ST_CONFIG) or {}
    model_type = st_config.get("model_type")
    if model_type == "MultiVectorEncoder":
        settings = _read_sentence_transformers(files, st_config)
    elif model_type in (None, "ColBERT"):
        settings = _read_pylate(files, st_config)
    else:
        raise _refuse(files, ST_CONFIG, "model_type", f"{model_type!r} is not a ColBERT model")
    if not settings.dense:
        raise _refuse(files, "modules.json", "Dense", "a ColBERT checkpoint needs a Dense module")
    return settings
