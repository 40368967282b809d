"""Build a small, seeded, offline ColQwen3 checkpoint (colpali-engine's own classes and layout).

Runs in the ColPali reference venv (no hub access needed):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|cpu|bench] [--corpus corpus.json]

Steps: train a byte-level BPE tokenizer with Qwen2's pre-tokenisation on the corpus plus stdlib
docstrings and wrap it as a ``Qwen2Tokenizer`` with Qwen3-VL's special tokens appended after
the BPE vocabulary (as in Qwen's own tokenizer); build a tiny ``Qwen3VLConfig`` whose token ids
match that tokenizer; a small image processor (transformers' PIL one: torchvision does not load
on the CPU machines); then ``ColQwen3(config)`` (random init, colpali-engine's fixed 320-wide
projection) and ``ColQwen3Processor``, both ``save_pretrained(DIR)``, reloaded with their
``from_pretrained`` and checked weight for weight.

``Qwen3VLProcessor`` requires a video processor, so Qwen3-VL's is saved too (same patch grid);
ColQwen3 never processes videos (that alone would need torchvision).

Sizes: ``tiny`` (the parity tests' model), ``cpu`` (a small benchmark model a 2-core CPU serves
in well under a second per page) and ``bench`` (Qwen3-VL-2B's shapes, for GPU benchmarks). The
two benchmark sizes use Qwen's initializer range (0.02), zero the projection's bias (vLLM's
native ``ColQwen3Model`` serves a colpali-engine checkpoint only with ``dim`` given in its
config, and then without the bias: with a zero bias both compute the same vectors) and
``bench`` is saved in bfloat16. Their weights are random: ColPali has no data-dependent
decoding, so the work per page, and thus every timing, is that of a trained model of the same
shapes.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from vllm_factory.core.image_processing import use_pil_image_processors

use_pil_image_processors()  # before transformers' Qwen2-VL / colpali-engine's modules load

import torch
from colpali_encode import check_not_degenerate, load_class
from tiny_checkpoint import builder_arguments, training_texts
from tokenizers import (
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)
from transformers import Qwen2Tokenizer, Qwen3VLConfig
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
    Qwen2VLImageProcessorPil,
)
from transformers.models.qwen3_vl.video_processing_qwen3_vl import (
    Qwen3VLVideoProcessor,
)

LOG = logging.getLogger("build_checkpoint")
HERE = Path(__file__).resolve().parent
MODEL_CLASS, PROCESSOR_CLASS = (
    "colpali_engine.models:ColQwen3",
    "colpali_engine.models:ColQwen3Processor",
)
# Qwen3-VL's special tokens, in Qwen's order (ids follow the BPE vocabulary).
EOT = "<|endoftext|>"
SPECIALS = [EOT, "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]  # fmt: skip
DOC_MODULES = ["argparse", "collections", "csv", "datetime", "email", "json", "logging", "os",
               "pathlib", "re", "string", "textwrap", "unittest", "urllib.parse"]  # fmt: skip

# Text: head_dim 32 (vLLM's CPU attention takes 32 or 64), mrope_section sums to head_dim / 2.
# Vision: patch 16, merge 2 (a merged token is 32x32 pixels); 4..256 merged tokens an image.
SIZES: dict[str, dict] = {
    "tiny": {
        "text": {"hidden_size": 64, "num_attention_heads": 2, "head_dim": 32,
                 "num_key_value_heads": 1, "num_hidden_layers": 3, "intermediate_size": 128,
                 "max_position_embeddings": 4096},
        "mrope_section": [6, 5, 5],
        "vision": {"depth": 2, "hidden_size": 64, "num_heads": 2, "intermediate_size": 128,
                   "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                   "num_position_embeddings": 256, "deepstack_visual_indexes": [0, 1]},
        "min_tokens": 4,
        "max_tokens": 256,
    },
    # A small model for CPU benchmarks: a 768 x 1024 page becomes 234 image tokens.
    "cpu": {
        "text": {"hidden_size": 512, "num_attention_heads": 8, "head_dim": 64,
                 "num_key_value_heads": 4, "num_hidden_layers": 4, "intermediate_size": 1536,
                 "max_position_embeddings": 4096},
        "mrope_section": [12, 10, 10],
        "vision": {"depth": 4, "hidden_size": 256, "num_heads": 4, "intermediate_size": 1024,
                   "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                   "num_position_embeddings": 1024, "deepstack_visual_indexes": [1, 2]},
        "min_tokens": 4,
        "max_tokens": 256,
        "initializer_range": 0.02,
        "zero_projection_bias": True,
    },
    # Qwen3-VL-2B's shapes (Qwen3-VL's image budget, capped at 1280 image tokens): a
    # 768 x 1024 page is 768 image tokens, unresized.
    "bench": {
        "text": {"hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128,
                 "num_key_value_heads": 8, "num_hidden_layers": 28, "intermediate_size": 6144,
                 "max_position_embeddings": 32768},
        "mrope_section": [24, 20, 20],
        "vision": {"depth": 24, "hidden_size": 1024, "num_heads": 16, "intermediate_size": 4096,
                   "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                   "num_position_embeddings": 2304, "deepstack_visual_indexes": [5, 11, 17]},
        "min_tokens": 64,
        "max_tokens": 1280,
        "initializer_range": 0.02,
        "zero_projection_bias": True,
        "save_dtype": "bfloat16",
    },
}  # fmt: skip


def train_tokenizer(texts: list[str], vocab_size: int) -> Qwen2Tokenizer:
    """Byte-level BPE trained with Qwen2's normaliser and pre-tokeniser, as a ``Qwen2Tokenizer``
    (its own pipeline: no BOS, nothing appended) with :data:`SPECIALS` added after the vocab."""
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
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    qwen = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token=EOT,
        pad_token=EOT,
        extra_special_tokens=SPECIALS[1:],
        model_max_length=4096,
    )
    missing = [t for t in SPECIALS if qwen.convert_tokens_to_ids(t) in (None, qwen.unk_token_id)]
    assert not missing and len(qwen) == len(model["vocab"]) + len(SPECIALS), missing
    return qwen


def build_config(tok: Qwen2Tokenizer, size: str) -> Qwen3VLConfig:
    s = SIZES[size]
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
    text = {
        **s["text"],
        "vocab_size": len(tok),
        "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0,
                            "mrope_section": s["mrope_section"], "mrope_interleaved": True},
        # tiny: larger than Qwen's 0.02 so that tokens and positions give clearly distinct
        # vectors.
        "initializer_range": s.get("initializer_range", 0.1),
        "pad_token_id": ids[EOT],
        "bos_token_id": None,
        "eos_token_id": ids[EOT],
    }  # fmt: skip
    assert sum(s["mrope_section"]) * 2 == text["head_dim"], "mrope_section must sum to head_dim/2"
    vision = {**s["vision"], "out_hidden_size": text["hidden_size"],
              "initializer_range": s.get("initializer_range", 0.1)}  # fmt: skip
    side = int(vision["num_position_embeddings"] ** 0.5)
    assert side * side == vision["num_position_embeddings"], "num_position_embeddings: a square"
    assert all(0 <= i < vision["depth"] for i in vision["deepstack_visual_indexes"])
    assert len(vision["deepstack_visual_indexes"]) <= text["num_hidden_layers"]
    return Qwen3VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


def pixel_budget(size: str, frames: int = 1) -> dict[str, int]:
    """``size`` of the image (and video) processors: ``min_tokens..max_tokens`` merged tokens
    (of ``frames`` frames)."""
    s = SIZES[size]
    tile = s["vision"]["patch_size"] * s["vision"]["spatial_merge_size"]
    return {"shortest_edge": s["min_tokens"] * tile * tile * frames,
            "longest_edge": s["max_tokens"] * tile * tile * frames}  # fmt: skip


def build_image_processor(size: str) -> Qwen2VLImageProcessorPil:
    """Qwen3-VL's preprocessing (mean/std 0.5, bicubic) with :func:`pixel_budget`."""
    v = SIZES[size]["vision"]
    return Qwen2VLImageProcessorPil(
        patch_size=v["patch_size"], merge_size=v["spatial_merge_size"],
        temporal_patch_size=v["temporal_patch_size"], size=pixel_budget(size),
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
    )  # fmt: skip


def build_video_processor(size: str) -> Qwen3VLVideoProcessor:
    """Qwen3-VL's video processor with the same patch grid (``Qwen3VLProcessor`` requires one;
    ColQwen3 never processes videos, and doing so would need torchvision)."""
    v = SIZES[size]["vision"]
    return Qwen3VLVideoProcessor(
        patch_size=v["patch_size"], merge_size=v["spatial_merge_size"],
        temporal_patch_size=v["temporal_patch_size"], size=pixel_budget(size, frames=2),
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], min_frames=2, max_frames=8,
        max_video_tokens=SIZES[size]["max_tokens"],
    )  # fmt: skip


def main() -> None:
    args = builder_arguments(__doc__, SIZES, HERE / "corpus.json")
    data = json.loads(args.corpus.read_text(encoding="utf-8"))
    texts = [x["text"] for part in ("queries", "documents") for x in data[part]]
    texts += [x.get("text", "") for x in data.get("images", [])]
    tok = train_tokenizer(training_texts(texts, DOC_MODULES, held_out=False), args.vocab_size)
    LOG.info("tokenizer: %d tokens, specials %s", len(tok),
             {t: tok.convert_tokens_to_ids(t) for t in SPECIALS})  # fmt: skip

    model_cls, processor_cls = load_class(MODEL_CLASS), load_class(PROCESSOR_CLASS)
    config = build_config(tok, args.size)
    torch.manual_seed(args.seed)
    model = model_cls(config).eval()
    with torch.no_grad():  # random norm weights: the default init leaves them at one
        for name, param in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                param.uniform_(0.5, 1.5)
        if SIZES[args.size].get("zero_projection_bias"):
            model.custom_text_proj.bias.zero_()
    dtype = getattr(torch, SIZES[args.size].get("save_dtype", "float32"))
    model.to(dtype)
    processor = processor_cls(
        image_processor=build_image_processor(args.size),
        tokenizer=tok,
        video_processor=build_video_processor(args.size),
    )
    if args.out.exists():
        shutil.rmtree(args.out)
    model.save_pretrained(args.out)
    processor.save_pretrained(args.out)

    reloaded = model_cls.from_pretrained(args.out, dtype=dtype).eval()
    theirs = reloaded.state_dict()
    ours = model.state_dict()
    assert ours.keys() == theirs.keys(), set(ours) ^ set(theirs)
    bad = [k for k, v in ours.items() if not torch.equal(v, theirs[k])]
    assert not bad, f"weights changed on reload: {bad[:5]}"
    processor2 = processor_cls.from_pretrained(args.out)
    probe = data["queries"][2]["text"]
    assert processor2.process_queries([probe])["input_ids"].tolist() == (
        processor.process_queries([probe])["input_ids"].tolist()
    ), "tokenizer changed on reload"
    with torch.inference_mode():
        vecs = reloaded(**processor2.process_texts([data["documents"][2]["text"]]))[0]
    mean_cos = check_not_degenerate(vecs.float().numpy(), "document d02")
    LOG.info(
        "saved %s (%s, seed %d): %d parameters, mean token cosine in one doc %.3f; files: %s",
        args.out, args.size, args.seed, sum(p.numel() for p in model.parameters()), mean_cos,
        sorted(p.name for p in args.out.iterdir()),
    )  # fmt: skip


if __name__ == "__main__":
    main()
