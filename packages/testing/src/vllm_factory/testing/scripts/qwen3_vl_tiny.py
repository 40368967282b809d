"""Tiny offline Qwen3-VL parts for the ColPali family's checkpoint builders (runs in the ColPali
reference venv, as ``import qwen3_vl_tiny`` beside a builder: ``refenv.ReferenceEnv.run`` puts
this folder on ``PYTHONPATH``).

- :data:`TINY`: the parity tests' tiny Qwen3-VL sizes (text, M-RoPE, vision, image budget,
  initializer range), the :data:`GRID` patch grid in each size's ``vision``; :data:`CPU` and
  :data:`BENCH`: the benchmark sizes (a small CPU model; Qwen3-VL-2B's shapes for GPUs).
- :func:`qwen_tokenizer`: a byte-level BPE trained on the given texts with Qwen2's normaliser
  and pre-tokeniser, as a ``Qwen2Tokenizer`` (no BOS, nothing appended) with Qwen3-VL's special
  tokens after the learned vocabulary, as in Qwen's own tokenizer; optionally with
  :data:`CHAT_TEMPLATE`.
- :data:`CHAT_TEMPLATE`: Qwen3-VL's chat format (``<|im_start|>role\\n ... <|im_end|>\\n``, one
  ``<|vision_start|><|image_pad|><|vision_end|>`` per image, ``<|im_start|>assistant\\n`` as the
  generation prompt), for checkpoints whose library builds prompts with the chat template.
- :func:`qwen3_vl_config`: a ``Qwen3VLConfig`` whose special token ids match that tokenizer.
- :func:`pil_image_processor`: Qwen3-VL's image preprocessing (mean / std 0.5, bicubic) in
  transformers' PIL backend, with a budget of ``min_tokens .. max_tokens`` merged tokens;
  :func:`video_processor`: Qwen3-VL's video processor on the same grid (``Qwen3VLProcessor``
  requires one; processing videos would need torchvision).
- :func:`randomize_norms`: random norm weights (the default init leaves them at one).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

LOG = logging.getLogger("qwen3_vl_tiny")
EOT = "<|endoftext|>"
# Qwen3-VL's special tokens, in Qwen's order (their ids follow the BPE vocabulary).
SPECIALS = [EOT, "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]  # fmt: skip
IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
VIDEO_PLACEHOLDER = "<|vision_start|><|video_pad|><|vision_end|>"

# Qwen3-VL's patch grid: patch 16, merge 2 (a merged token is 32 x 32 pixels), 2 frames a patch.
GRID = {"patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}
# The parity tests' model. Text: head_dim 32 (vLLM's CPU attention takes 32 or 64),
# mrope_section sums to head_dim / 2. Vision: 4..256 merged tokens an image. Initializer range
# larger than Qwen's 0.02, so that tokens and positions give clearly distinct vectors.
TINY: dict[str, Any] = {
    "text": {"hidden_size": 64, "num_attention_heads": 2, "head_dim": 32,
             "num_key_value_heads": 1, "num_hidden_layers": 3, "intermediate_size": 128,
             "max_position_embeddings": 4096},
    "mrope_section": [6, 5, 5],
    "vision": {**GRID, "depth": 2, "hidden_size": 64, "num_heads": 2, "intermediate_size": 128,
               "num_position_embeddings": 256, "deepstack_visual_indexes": [0, 1]},
    "min_tokens": 4,
    "max_tokens": 256,
    "initializer_range": 0.1,
}  # fmt: skip

# Benchmark sizes (random weights: a ColPali model runs one forward pass per input whatever its
# weights, so the work per input is that of a trained model of the same shapes). Qwen's
# initializer range; head_dim 64 or 128 (mrope_section sums to head_dim / 2).
# CPU: a small model a 2-core CPU serves in well under a second per page (a 768 x 1024 page
# becomes 234 image tokens).
CPU: dict[str, Any] = {
    "text": {"hidden_size": 512, "num_attention_heads": 8, "head_dim": 64,
             "num_key_value_heads": 4, "num_hidden_layers": 4, "intermediate_size": 1536,
             "max_position_embeddings": 4096},
    "mrope_section": [12, 10, 10],
    "vision": {**GRID, "depth": 4, "hidden_size": 256, "num_heads": 4,
               "intermediate_size": 1024, "num_position_embeddings": 1024,
               "deepstack_visual_indexes": [1, 2]},
    "min_tokens": 4,
    "max_tokens": 256,
    "initializer_range": 0.02,
}  # fmt: skip
# GPU: Qwen3-VL-2B's shapes (Qwen3-VL's image budget, capped at 1280 image tokens: a 768 x 1024
# page is 768 image tokens, unresized), saved in bfloat16.
BENCH: dict[str, Any] = {
    "text": {"hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128,
             "num_key_value_heads": 8, "num_hidden_layers": 28, "intermediate_size": 6144,
             "max_position_embeddings": 32768},
    "mrope_section": [24, 20, 20],
    "vision": {**GRID, "depth": 24, "hidden_size": 1024, "num_heads": 16,
               "intermediate_size": 4096, "num_position_embeddings": 2304,
               "deepstack_visual_indexes": [5, 11, 17]},
    "min_tokens": 64,
    "max_tokens": 1280,
    "initializer_range": 0.02,
    "save_dtype": "bfloat16",
}  # fmt: skip

# Messages whose content is a string or a list of parts ({"type": "text", "text": ...},
# {"type": "image"[, "image": ...]}, {"type": "video"}); no tools.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or 'image' in part -%}"
    "{{- '" + IMAGE_PLACEHOLDER + "' -}}"
    "{%- elif part['type'] == 'video' or 'video' in part -%}"
    "{{- '" + VIDEO_PLACEHOLDER + "' -}}"
    "{%- elif 'text' in part -%}{{- part['text'] -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def qwen_tokenizer(
    texts: list[str],
    vocab_size: int,
    chat_template: str | None = None,
    model_max_length: int = 32768,
) -> Any:
    """A ``Qwen2Tokenizer`` of ``vocab_size`` tokens (BPE plus :data:`SPECIALS`) trained on
    ``texts``; ``chat_template`` set when given."""
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])  # fmt: skip
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    bpe = json.loads(tok.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in bpe["merges"]]
    qwen = Qwen2Tokenizer(
        vocab=bpe["vocab"], merges=merges, unk_token=None, bos_token=None, eos_token=EOT,
        pad_token=EOT, extra_special_tokens=SPECIALS[1:], model_max_length=model_max_length,
    )  # fmt: skip
    missing = [t for t in SPECIALS if qwen.convert_tokens_to_ids(t) in (None, qwen.unk_token_id)]
    if missing or len(qwen) != len(bpe["vocab"]) + len(SPECIALS):
        raise RuntimeError(f"special tokens not in the vocabulary: {missing}")
    if chat_template is not None:
        qwen.chat_template = chat_template
    LOG.info("tokenizer: %d tokens, specials %s", len(qwen),
             {t: qwen.convert_tokens_to_ids(t) for t in SPECIALS})  # fmt: skip
    return qwen


def qwen3_vl_config(
    tok: Any,
    text: dict[str, Any],
    vision: dict[str, Any],
    mrope_section: list[int],
    initializer_range: float,
    **extra: Any,
) -> Any:
    """A ``Qwen3VLConfig``: ``text`` / ``vision`` sizes, interleaved M-RoPE of ``mrope_section``
    (summing to half the head size), the tokenizer's vocabulary and special token ids; ``extra``:
    more top-level fields."""
    from transformers import Qwen3VLConfig

    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
    text = {
        **text,
        "vocab_size": len(tok),
        "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0,
                            "mrope_section": mrope_section, "mrope_interleaved": True},
        "initializer_range": initializer_range,
        "pad_token_id": ids[EOT],
        "bos_token_id": None,
        "eos_token_id": ids[EOT],
    }  # fmt: skip
    if sum(mrope_section) * 2 != text["head_dim"]:
        raise ValueError("mrope_section must sum to head_dim / 2")
    vision = {**vision, "out_hidden_size": text["hidden_size"],
              "initializer_range": initializer_range}  # fmt: skip
    side = int(vision["num_position_embeddings"] ** 0.5)
    if side * side != vision["num_position_embeddings"]:
        raise ValueError("num_position_embeddings must be a square")
    if not all(0 <= i < vision["depth"] for i in vision["deepstack_visual_indexes"]):
        raise ValueError("deepstack_visual_indexes must name vision blocks")
    if len(vision["deepstack_visual_indexes"]) > text["num_hidden_layers"]:
        raise ValueError("more deepstack_visual_indexes than text layers to add them to")
    return Qwen3VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
        **extra,
    )


def pixel_budget(
    vision: dict[str, Any], min_tokens: int, max_tokens: int, frames: int = 1
) -> dict[str, int]:
    """The image (and video) processor's ``size``: ``min_tokens .. max_tokens`` merged tokens
    (of ``frames`` frames)."""
    pixels = (vision["patch_size"] * vision["spatial_merge_size"]) ** 2 * frames
    return {"shortest_edge": min_tokens * pixels, "longest_edge": max_tokens * pixels}


def pil_image_processor(vision: dict[str, Any], min_tokens: int, max_tokens: int) -> Any:
    """Qwen3-VL's image preprocessing in transformers' PIL backend (torchvision does not load
    on the CPU machines), for ``vision``'s patch grid and :func:`pixel_budget`."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    return Qwen2VLImageProcessorPil(
        patch_size=vision["patch_size"], merge_size=vision["spatial_merge_size"],
        temporal_patch_size=vision["temporal_patch_size"],
        size=pixel_budget(vision, min_tokens, max_tokens),
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
    )  # fmt: skip


def video_processor(vision: dict[str, Any], min_tokens: int, max_tokens: int) -> Any:
    """Qwen3-VL's video processor on ``vision``'s patch grid, 2..8 frames and the budget of
    :func:`pixel_budget` per 2 frames (``Qwen3VLProcessor`` requires one; it is saved, never
    run: processing videos would need torchvision)."""
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    return Qwen3VLVideoProcessor(
        patch_size=vision["patch_size"], merge_size=vision["spatial_merge_size"],
        temporal_patch_size=vision["temporal_patch_size"],
        size=pixel_budget(vision, min_tokens, max_tokens, frames=2),
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], min_frames=2, max_frames=8,
        max_video_tokens=max_tokens,
    )  # fmt: skip


def randomize_norms(model: Any, low: float = 0.5, high: float = 1.5) -> None:
    """Every norm weight of ``model`` drawn from U(low, high), so that no norm is an identity."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                param.uniform_(low, high)
