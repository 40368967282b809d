"""Matmul FLOPs of the encoders and heads we serve, for the MFU line of bench reports.

One multiply-add counts 2 FLOPs. Per token and layer: the projections and the MLP (weights
times activations); attention scores and weighted values ``4 * width * context`` where
``context`` is the keys a query sees (the sequence, or the sliding window). Norms, softmax
and activations are left out: MFU is about the matmul units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def modernbert(config: Mapping[str, Any], tokens: int) -> float:
    """ModernBERT (fused Wqkv, GeGLU MLP, global and sliding-window layers)."""
    h, i = int(config["hidden_size"]), int(config["intermediate_size"])
    layers = int(config["num_hidden_layers"])
    every = int(config.get("global_attn_every_n_layers") or 1)
    kinds = config.get("layer_types") or [
        "full_attention" if n % every == 0 else "sliding_attention" for n in range(layers)
    ]
    global_layers = sum(1 for k in kinds if k == "full_attention")
    window = int(config.get("local_attention") or 0) + 1
    context = global_layers * tokens + (layers - global_layers) * min(tokens, window)
    return float(tokens * (layers * (8 * h * h + 6 * h * i) + 4 * h * context))


def deberta_v2(config: Mapping[str, Any], tokens: int) -> float:
    """DeBERTa-v2/v3: BERT layers plus disentangled attention (content-to-position and
    position-to-content scores over ``2 * span`` relative positions, whose keys and queries
    are projected once per sequence)."""
    h, i = int(config["hidden_size"]), int(config["intermediate_size"])
    layers = int(config["num_hidden_layers"])
    span = int(config.get("position_buckets") or 0) or int(
        config.get("max_relative_positions") or config.get("max_position_embeddings", 512)
    )
    kinds = str(config.get("pos_att_type") or "")
    relative = sum(1 for kind in ("c2p", "p2c") if kind in kinds)
    per_token = 8 * h * h + 4 * h * i + 4 * h * tokens + relative * 2 * h * 2 * span
    per_sequence = relative * 2 * (2 * span) * h * h
    return float(layers * (tokens * per_token + per_sequence))


def t5_encoder(config: Mapping[str, Any], tokens: int) -> float:
    """T5 / mT5 encoder (``heads * d_kv`` attention width, gated or plain MLP)."""
    h, inner = int(config["d_model"]), int(config["num_heads"]) * int(config["d_kv"])
    d_ff, layers = int(config["d_ff"]), int(config["num_layers"])
    mlp = (3 if "gated" in str(config.get("feed_forward_proj", "")) else 2) * 2 * h * d_ff
    return float(layers * tokens * (8 * h * inner + mlp + 4 * inner * tokens))


def lfm2_shape(config: Mapping[str, Any]) -> dict[str, int]:
    """An LFM2 text config (``Lfm2Config`` / LiquidAI's keys) as the widths that cost FLOPs:
    hidden, the SwiGLU width (after LFM2's automatic adjustment, as its MLP builds it), the
    key / value width, the attention and convolution layer counts, the convolution length."""
    kinds = config["layer_types"]
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    inter = int(config["intermediate_size"])
    if config.get("block_auto_adjust_ff_dim", True):
        inter = int(float(config.get("block_ffn_dim_multiplier") or 1.0) * int(2 * inter / 3))
        step = int(config.get("block_multiple_of", 256))
        inter = step * ((inter + step - 1) // step)
    return {
        "hidden": hidden,
        "intermediate": inter,
        "kv": int(config["num_key_value_heads"]) * hidden // heads,
        "attention_layers": sum(1 for k in kinds if k == "full_attention"),
        "conv_layers": sum(1 for k in kinds if k != "full_attention"),
        "width": int(config.get("conv_L_cache", 3)),
    }


def lfm2_flops(shape: dict[str, int], tokens: int, causal: bool = True) -> float:
    """An LFM2 language model over ``tokens`` tokens (``shape`` from :func:`lfm2_shape`): per
    token, every layer's SwiGLU ``6hi``; attention layers ``4h^2 + 4h*kv`` (q, out, k, v) plus
    scores and weighted sum over the context (``4h (n + 1) / 2`` on average when causal,
    ``4hn`` otherwise); convolution layers ``8h^2`` (in 3h, out h) plus the depthwise
    convolution ``2h * width``."""
    h, i, kv = shape["hidden"], shape["intermediate"], shape["kv"]
    layers = shape["attention_layers"] + shape["conv_layers"]
    context = (tokens + 1) / 2 if causal else tokens
    per_token = layers * 6 * h * i
    per_token += shape["attention_layers"] * (4 * h * h + 4 * h * kv + 4 * h * context)
    per_token += shape["conv_layers"] * (8 * h * h + 2 * h * shape["width"])
    return float(tokens * per_token)


def siglip2_flops(vision: Mapping[str, Any], tiles: Sequence[int]) -> float:
    """A SigLIP2 tower (``Siglip2VisionConfig`` keys) over images of ``tiles`` patches each:
    per tile of p patches of width v (MLP i, L layers, patch s), the patch embedding
    ``2 p (3 s^2) v``, per layer QKV + output ``8 p v^2``, MLP ``4 p v i`` and attention over
    the tile ``4 p^2 v``."""
    v, i = int(vision["hidden_size"]), int(vision["intermediate_size"])
    layers, pixels = int(vision["num_hidden_layers"]), 3 * int(vision["patch_size"]) ** 2
    return float(sum(2 * p * pixels * v + layers * (8 * p * v * v + 4 * p * v * i + 4 * p * p * v)
                     for p in tiles))  # fmt: skip


ENCODERS = {"modernbert": modernbert, "deberta-v2": deberta_v2, "mt5": t5_encoder,
            "t5": t5_encoder}  # fmt: skip


def encoder(config: Mapping[str, Any], tokens: int) -> float | None:
    """FLOPs of the encoder ``config`` (a Hugging Face config dict) over ``tokens`` tokens;
    None for a model type not listed in ``ENCODERS``."""
    count = ENCODERS.get(str(config.get("model_type")))
    return None if count is None else count(config, tokens)


def gliner_span_head(
    gliner_config: Mapping[str, Any], tokens: int, words: int, labels: int
) -> float:
    """The GLiNER span head on one prompt of ``tokens`` tokens, ``words`` words and ``labels``
    labels, as vllm-factory computes it: token projection, label MLP, BiLSTM, start / end
    MLPs per word, the span MLP's first layer per word (its start and end halves), its last
    layer folded into the labels, and per (word, width) the ``4h``-wide hidden layer against
    each label. gliner's own formulation runs the span MLP on every (word, width):
    :func:`gliner_span_head_unfolded`, about 5.5x these FLOPs at h 768, 5 labels."""
    g, k = int(gliner_config["hidden_size"]), int(gliner_config.get("max_width", 12))
    projection, lstm = _gliner_head_common(gliner_config, tokens)
    per_word = lstm + 2 * 16 * g * g + 16 * g * g + k * 2 * 4 * g * labels
    return float(projection + labels * (16 + 8) * g * g + words * per_word)


def gliner_span_head_unfolded(
    gliner_config: Mapping[str, Any], tokens: int, words: int, labels: int
) -> float:
    """gliner's markerV0 span head as gliner computes it (see :func:`gliner_span_head`):
    the span MLP (``2h -> 4h -> h``) on every (word, width), then the span x label scores."""
    g, k = int(gliner_config["hidden_size"]), int(gliner_config.get("max_width", 12))
    projection, lstm = _gliner_head_common(gliner_config, tokens)
    per_word = lstm + 2 * 16 * g * g + k * (24 * g * g + 2 * g * labels)
    return float(projection + labels * 16 * g * g + words * per_word)


def _gliner_head_common(gliner_config: Mapping[str, Any], tokens: int) -> tuple[int, int]:
    """(the encoder-to-head projection over ``tokens``, the BiLSTM per word) in FLOPs."""
    g = int(gliner_config["hidden_size"])
    encoder_width = gliner_config["encoder_config"]
    h = int(encoder_width.get("hidden_size") or encoder_width.get("d_model"))
    projection = 2 * h * g * tokens if h != g else 0
    return projection, int(gliner_config.get("num_rnn_layers", 1)) * 12 * g * g


def gliner2_span_head(hidden: int, max_width: int, words: int, queries: int) -> float:
    """gliner2's markerV0 span head on one prompt of ``words`` text words: the start and end
    MLPs (h -> 4h -> h) per word, the span MLP (2h -> 4h -> h) on every (word, width), and the
    span x query dot products (``queries``: instances x fields over the span tasks)."""
    h = hidden
    per_word = 2 * 16 * h * h + max_width * (24 * h * h + 2 * h * queries)
    return float(words * per_word)
