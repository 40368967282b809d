"""The GLiNER checkpoint settings we serve (``gliner_config.json``); no vLLM import."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CONFIG_FILE = "gliner_config.json"
SUBTOKEN_POOLING = ("first", "last", "mean", "max")
SPAN_MODES = ("markerV0", "token_level")
TOKEN_LEVEL = "token_level"  # start / end / inside scores per word and label, not per span
MODEL_TYPES = (
    None,
    "gliner_uni_encoder_span",
    "gliner_bi_encoder_span",
    "gliner_uni_encoder_token",
    "gliner_uni_encoder_span_relex",
)
# gliner's adjacency layers the relex head serves ("none": every pair of entities is scored).
RELATION_LAYERS = ("none", "dot", "bilinear", "mlp")


class UnsupportedGLiNERConfig(ValueError):
    """The checkpoint uses a GLiNER variant this head does not implement."""


@dataclass(frozen=True)
class GLiNERSettings:
    hidden_size: int  # GLiNER's width (after the optional projection of the encoder output)
    encoder_hidden_size: int
    max_width: int
    max_len: int  # words per text; gliner truncates longer texts
    span_mode: str
    subtoken_pooling: str
    num_rnn_layers: int
    embed_ent_token: bool
    class_token_index: int
    ent_token: str
    sep_token: str
    words_splitter_type: str
    encoder_model_type: str
    # Bi-encoder checkpoints: the label encoder's Hugging Face config (labels are encoded by
    # it and mean-pooled, not read at <<ENT>> tokens of the prompt); None for uni-encoders.
    labels_encoder_config: dict[str, Any] | None = field(default=None, compare=False)
    # Relex checkpoints (gliner's UniEncoderSpanRelexGLiNER): the adjacency layer ("none":
    # every pair of entities), the relation label marker and its token id; None otherwise.
    relations_layer: str | None = None
    rel_token: str = "<<REL>>"
    rel_token_index: int = -1
    embed_rel_token: bool = True

    @property
    def has_projection(self) -> bool:
        return self.hidden_size != self.encoder_hidden_size

    @property
    def bi_encoder(self) -> bool:
        return self.labels_encoder_config is not None

    @property
    def token_level(self) -> bool:
        """gliner's token model (``span_mode: token_level``): a scorer over (word, label)
        pairs instead of span vectors (:mod:`~vllm_factory.heads.gliner.token_level`)."""
        return self.span_mode == TOKEN_LEVEL

    @property
    def relex(self) -> bool:
        """gliner's relex span model: entities and the relations between them
        (:mod:`~vllm_factory.heads.gliner.relex`)."""
        return self.relations_layer is not None

    @property
    def runs_rnn(self) -> bool:
        """Whether gliner runs the word BiLSTM: its bi-encoder span model builds (and saves)
        one but never calls it (gliner 0.2.29), so neither do we."""
        return self.num_rnn_layers > 0 and not self.bi_encoder

    @property
    def labels_encoder_hidden_size(self) -> int | None:
        return _encoder_width(self.labels_encoder_config)


def _require(config: dict[str, Any], key: str) -> Any:
    if key not in config:
        raise UnsupportedGLiNERConfig(f"{CONFIG_FILE} has no {key!r}")
    return config[key]


# Keys of the encoder width in a saved Hugging Face config: T5 / mT5 save ``d_model``
# (``hidden_size`` is only an attribute alias there).
ENCODER_WIDTH_KEYS = ("hidden_size", "d_model")


def _encoder_width(encoder: Any) -> int | None:
    if not isinstance(encoder, dict):
        return None
    for key in ENCODER_WIDTH_KEYS:
        if key in encoder:
            return int(encoder[key])
    return None


def parse_settings(config: dict[str, Any]) -> GLiNERSettings:
    """Validate a ``gliner_config.json`` dict; unsupported variants fail with the reason."""
    encoder = config.get("encoder_config")
    encoder_width = _encoder_width(encoder)
    if encoder_width is None:
        raise UnsupportedGLiNERConfig(
            f"{CONFIG_FILE} has no encoder_config with a hidden_size (saved by an old gliner?)"
        )
    labels_config = config.get("labels_encoder_config")
    bi_encoder = bool(config.get("labels_encoder")) or labels_config is not None
    if bi_encoder and _encoder_width(labels_config) is None:
        raise UnsupportedGLiNERConfig(
            f"{CONFIG_FILE} names a labels_encoder but has no labels_encoder_config with a "
            "hidden_size: a bi-encoder saved by an old gliner?"
        )
    # Variants with other heads or extra modules: refuse rather than serve wrong scores.
    for key, what in (
        ("labels_decoder", "label decoder"),
        ("span_encoder_config", "span context encoder"),
        ("post_fusion_schema", "post-fusion layers"),
        ("precomputed_prompts_mode", "precomputed prompts"),
        ("fuse_layers", "fused encoder layers"),
    ):
        if config.get(key):
            raise UnsupportedGLiNERConfig(f"{key} is set: {what} GLiNER models are not supported")
    relations_layer = _relations_layer(config, config.get("span_mode", "markerV0"), bi_encoder)
    model_type = config.get("model_type")
    if model_type == "gliner_bi_encoder_token":
        raise UnsupportedGLiNERConfig(
            "model_type 'gliner_bi_encoder_token': token-level bi-encoder GLiNER models are not "
            "supported (token-level uni-encoders and span bi-encoders are)"
        )
    if model_type not in MODEL_TYPES:
        raise UnsupportedGLiNERConfig(f"model_type {model_type!r} is not a span GLiNER")
    if (model_type == "gliner_bi_encoder_span") != bi_encoder and model_type is not None:
        raise UnsupportedGLiNERConfig(
            f"model_type {model_type!r} does not match labels_encoder_config"
        )
    span_mode = config.get("span_mode", "markerV0")
    if span_mode not in SPAN_MODES:
        raise UnsupportedGLiNERConfig(
            f"span_mode {span_mode!r} is not supported (supported: {', '.join(SPAN_MODES)})"
        )
    # gliner picks the span or token model by span_mode (not model_type): so do we.
    if span_mode == TOKEN_LEVEL:
        if bi_encoder:
            raise UnsupportedGLiNERConfig(
                "span_mode 'token_level' with a labels_encoder: token-level bi-encoder GLiNER "
                "models are not supported (token-level uni-encoders and span bi-encoders are)"
            )
        if config.get("represent_spans"):
            raise UnsupportedGLiNERConfig(
                "represent_spans is set: token-level GLiNER models that rescore spans are not "
                "supported"
            )
    pooling = config.get("subtoken_pooling", "first")
    if pooling not in SUBTOKEN_POOLING:
        raise UnsupportedGLiNERConfig(f"subtoken_pooling {pooling!r} is not supported")
    splitter = config.get("words_splitter_type", "whitespace")
    if splitter != "whitespace":
        raise UnsupportedGLiNERConfig(
            f"words_splitter_type {splitter!r} is not supported (only 'whitespace')"
        )
    # A bi-encoder's prompt has no label markers (gliner never adds them: index -1).
    index = (
        config.get("class_token_index", -1) if bi_encoder else _require(config, "class_token_index")
    )
    class_index = int(index)
    if class_index < 0 and not bi_encoder:
        raise UnsupportedGLiNERConfig("class_token_index is -1: the checkpoint was never resized")
    return GLiNERSettings(
        hidden_size=int(_require(config, "hidden_size")),
        encoder_hidden_size=encoder_width,
        max_width=int(_require(config, "max_width")),
        max_len=int(config.get("max_len", 384)),
        span_mode=span_mode,
        subtoken_pooling=pooling,
        num_rnn_layers=int(config.get("num_rnn_layers", 1)),
        embed_ent_token=bool(config.get("embed_ent_token", True)),
        class_token_index=class_index,
        ent_token=str(config.get("ent_token", "<<ENT>>")),
        sep_token=str(config.get("sep_token", "<<SEP>>")),
        words_splitter_type=splitter,
        encoder_model_type=str(encoder.get("model_type", "deberta-v2")),
        labels_encoder_config=dict(labels_config) if bi_encoder else None,
        relations_layer=relations_layer,
        rel_token=str(config.get("rel_token", "<<REL>>")),
        rel_token_index=int(config.get("rel_token_index", -1)),
        embed_rel_token=bool(config.get("embed_rel_token", True)),
    )


def _relations_layer(config: dict[str, Any], span_mode: str, bi_encoder: bool) -> str | None:
    """A relex checkpoint's ``relations_layer`` (None: not a relex checkpoint); the relex
    variants this head does not implement are refused, naming what they use."""
    layer = config.get("relations_layer")
    model_type = config.get("model_type")
    if model_type == "gliner_uni_encoder_token_relex" or (layer and span_mode == TOKEN_LEVEL):
        raise UnsupportedGLiNERConfig(
            "token-level relex GLiNER models (relations_layer with span_mode 'token_level') "
            "are not supported (span relex models are)"
        )
    if layer is None:
        if model_type == "gliner_uni_encoder_span_relex":
            raise UnsupportedGLiNERConfig(
                "model_type 'gliner_uni_encoder_span_relex' without a relations_layer"
            )
        return None
    if bi_encoder:
        raise UnsupportedGLiNERConfig("relations_layer with a labels_encoder is not supported")
    if config.get("triples_layer"):
        raise UnsupportedGLiNERConfig(
            f"triples_layer {config['triples_layer']!r} is set: relex models that score "
            "triples are not supported (relex models with a pair projection are)"
        )
    if str(layer).lower() not in RELATION_LAYERS:
        raise UnsupportedGLiNERConfig(
            f"relations_layer {layer!r} is not supported (supported: {', '.join(RELATION_LAYERS)})"
        )
    if int(config.get("rel_token_index", -1)) < 0:
        raise UnsupportedGLiNERConfig(
            "rel_token_index is -1: the relex checkpoint was never resized"
        )
    return str(layer).lower()


def read_settings(checkpoint: Any) -> GLiNERSettings:
    """Settings from a ``CheckpointFiles``; a clear error when the file is missing."""
    config = checkpoint.json(CONFIG_FILE)
    if config is None:
        raise UnsupportedGLiNERConfig(
            f"{checkpoint.model} has no {CONFIG_FILE}: prepare the GLiNER checkpoint with "
            "vllm-factory-prep first"
        )
    return parse_settings(config)
