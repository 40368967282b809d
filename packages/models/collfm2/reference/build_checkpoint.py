"""Build a small, seeded, offline ColLFM2 checkpoint (sauerkrautlm-colpali's own classes and layout).

Runs in the ColLFM2 reference venv (no hub access needed):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|cpu|bench] [--corpus corpus.json]

Steps: train a byte-level BPE tokenizer (LFM2-style: ``<|startoftext|>`` prepended, nothing
appended) with LFM2-VL's special tokens (``<image>``, ``<|image_start|>``, ``<|image_end|>``,
``<|img_thumbnail|>``, ``<|img_row_R_col_C|>``, the chat tokens) on the corpus plus stdlib
docstrings; build a random ``Lfm2VlForConditionalGeneration`` (a SigLIP2 vision tower, the
pixel-unshuffle projector and an LFM2 text model of short-convolution and attention layers) with
transformers' own classes and save it with its ``Lfm2VlProcessor`` (a smaller image budget than
LFM2-VL's, so that images are tiled at CPU-friendly sizes) to a temporary backbone directory,
as LiquidAI's LFM2-VL checkpoints are laid out. Then the library: ``ColLFM2(config=<that
directory>)`` loads the backbone and adds its 128-wide projection, ``ColLFM2Processor`` wraps the
processor, and both ``save_pretrained(DIR)``: ``config.json`` (model_type ``lfm2_vl``),
``model.safetensors``, ``collfm2_projection.pt`` and the processor files. Reloaded with
``collfm2_library.ColLFM2Reference`` and checked weight for weight.

The text config carries LFM2's original ``conv_dim`` / ``block_dim`` keys (LiquidAI's configs
have them, transformers' ``Lfm2Config`` does not write them; vLLM's LFM2 reads them) and no
``architectures`` (vLLM's model class names it).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

use_pil_image_processors()  # before transformers' LFM2-VL image processor module is imported

import torch
from collfm2_library import ColLFM2Reference, backbone_loading
from colpali_checkpoint import (
    check_same_ids,
    check_same_weights,
    corpus_texts,
    log_saved,
    save,
)
from colpali_encode import check_not_degenerate
from sauerkrautlm_colpali.models.lfm2.collfm2 import ColLFM2, ColLFM2Processor
from tiny_checkpoint import builder_arguments
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    Lfm2Config,
    Lfm2VlConfig,
    Lfm2VlForConditionalGeneration,
    Lfm2VlProcessor,
    PreTrainedTokenizerFast,
    Siglip2VisionConfig,
)
from transformers.models.lfm2_vl.image_processing_lfm2_vl import Lfm2VlImageProcessor

LOG = logging.getLogger("build_checkpoint")
HERE = Path(__file__).resolve().parent
PAD, BOS, EOT, IM_START, IM_END = (
    "<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
)  # fmt: skip
IMAGE, IMAGE_START, IMAGE_END, THUMBNAIL = (
    "<image>", "<|image_start|>", "<|image_end|>", "<|img_thumbnail|>",
)  # fmt: skip
GRID = [f"<|img_row_{r}_col_{c}|>" for r in range(1, 11) for c in range(1, 11)]
SPECIALS = [PAD, BOS, EOT, IM_START, IM_END, IMAGE, IMAGE_START, IMAGE_END, THUMBNAIL, *GRID]

# head_dim 32 in both towers (vLLM's CPU attention takes 32 or 64). Image processor: tiles of
# 256 px (16 x 16 patches of 16 px, 64 tokens after the 2x2 pixel unshuffle), 16..64 tokens for
# an image that is not tiled, 2..6 tiles plus a thumbnail above twice that budget.
SIZES: dict[str, dict] = {
    "tiny": {
        "text": {"hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1,
                 "intermediate_size": 128, "block_multiple_of": 64,
                 "layer_types": ["conv", "full_attention", "conv", "conv", "full_attention"],
                 "max_position_embeddings": 4096},
        "vision": {"hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2,
                   "intermediate_size": 128, "patch_size": 16, "num_patches": 256},
        "projector_hidden_size": 96,
        "images": {"tile_size": 256, "min_image_tokens": 16, "max_image_tokens": 64,
                   "min_tiles": 2, "max_tiles": 6, "encoder_patch_size": 16,
                   "downsample_factor": 2, "image_mean": [0.5, 0.5, 0.5],
                   "image_std": [0.5, 0.5, 0.5]},
    },
    # Benchmark sizes (random weights: one forward pass per input whatever the weights, so the
    # work per page is that of a trained model of the same shapes). CPU: a small model with
    # 256-px tiles (a 768 x 1024 page: 2 x 2 tiles of 64 tokens and a thumbnail).
    "cpu": {
        "text": {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "intermediate_size": 1152, "block_multiple_of": 64,
                 "layer_types": ["conv", "conv", "full_attention", "conv", "full_attention",
                                 "conv"],
                 "max_position_embeddings": 4096},
        "vision": {"hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 4,
                   "intermediate_size": 1024, "patch_size": 16, "num_patches": 256},
        "projector_hidden_size": 512,
        "images": {"tile_size": 256, "min_image_tokens": 16, "max_image_tokens": 64,
                   "min_tiles": 2, "max_tiles": 4, "encoder_patch_size": 16,
                   "downsample_factor": 2},
        "initializer_range": 0.02,
    },
    # GPU: LFM2-VL-450M's shapes (SauerkrautLM-ColLFM2-450M's backbone): LFM2-350M (1024 wide,
    # 16 layers of which 6 GQA attention, 16 heads, 8 KV heads, SwiGLU 4608 after LFM2's
    # adjustment of 6656), a SigLIP2 base tower (768 wide, 12 layers, 12 heads, MLP 3072, patch
    # 16), projector 2560; LFM2-VL's image processor defaults (512-px tiles of 256 tokens, 2 - 10
    # tiles and a thumbnail, 64 - 256 tokens for an untiled image). Saved in bfloat16.
    "bench": {
        "text": {"hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8,
                 "intermediate_size": 6656, "block_multiple_of": 256,
                 "layer_types": ["full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv"
                                 for i in range(16)],
                 "max_position_embeddings": 128000},
        "vision": {"hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12,
                   "intermediate_size": 3072, "patch_size": 16, "num_patches": 256},
        "projector_hidden_size": 2560,
        "images": {"tile_size": 512, "min_image_tokens": 64, "max_image_tokens": 256,
                   "min_tiles": 2, "max_tiles": 10, "encoder_patch_size": 16,
                   "downsample_factor": 2},
        "initializer_range": 0.02,
        "save_dtype": "bfloat16",
    },
}  # fmt: skip


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE like LFM2's (BOS prepended, nothing appended) with :data:`SPECIALS`
    first in the vocabulary."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    ))  # fmt: skip
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B:1", special_tokens=[(BOS, tok.token_to_id(BOS))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=IM_END, pad_token=PAD,
        model_max_length=4096,
    )  # fmt: skip


def build_backbone(
    tok: PreTrainedTokenizerFast, size: str, seed: int
) -> Lfm2VlForConditionalGeneration:
    s = SIZES[size]
    hidden = s["text"]["hidden_size"]
    init = s.get("initializer_range", 0.1)
    text = Lfm2Config(
        **s["text"], vocab_size=len(tok), num_hidden_layers=len(s["text"]["layer_types"]),
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, initializer_range=init, conv_dim=hidden, block_dim=hidden,
    )  # fmt: skip
    # LFM2-VL uses the tower's last hidden state: no attention-pooling head (as LiquidAI's).
    vision = Siglip2VisionConfig(**s["vision"], initializer_range=init, vision_use_head=False)
    config = Lfm2VlConfig(
        text_config=text.to_dict(), vision_config=vision.to_dict(),
        image_token_id=tok.convert_tokens_to_ids(IMAGE),
        projector_hidden_size=s["projector_hidden_size"],
        downsample_factor=s["images"]["downsample_factor"],
    )  # fmt: skip
    torch.manual_seed(seed)
    model = Lfm2VlForConditionalGeneration(config).eval()
    # Random norms, convolution kernels and position embeddings: the default init leaves norms at
    # one and makes the vision tower's positions nearly alike.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                param.uniform_(0.5, 1.5)
            elif "norm" in name and name.endswith("bias"):
                param.uniform_(-0.2, 0.2)
            elif name.endswith(("conv.conv.weight", "position_embedding.weight")):
                param.normal_(0.0, 0.5)
    return model


def main() -> None:
    args = builder_arguments(__doc__, SIZES, HERE / "corpus.json")
    data, texts = corpus_texts(args.corpus)
    tok = train_tokenizer(texts, args.vocab_size)
    LOG.info("tokenizer: %d tokens", len(tok))

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "lfm2-vl"
        build_backbone(tok, args.size, args.seed).save_pretrained(base)
        images = Lfm2VlImageProcessor(**SIZES[args.size]["images"])
        Lfm2VlProcessor(image_processor=images, tokenizer=tok).save_pretrained(base)
        torch.manual_seed(args.seed + 1)  # the library's projection init
        with backbone_loading(torch.float32):
            model = ColLFM2(config=str(base)).eval()
        model.float()  # the library casts its projection to bfloat16
        with torch.no_grad():  # a bias that is not zero, so that loading it is checked
            model.custom_text_proj.bias.uniform_(-0.1, 0.1)
        dtype = getattr(torch, SIZES[args.size].get("save_dtype", "float32"))
        model.to(dtype)
        processor = ColLFM2Processor.from_pretrained(str(base))
        save(args.out, model, processor)

    reloaded = ColLFM2Reference.from_pretrained(args.out, dtype)
    check_same_weights(model.state_dict(), reloaded.state_dict())
    processor2 = ColLFM2Processor.from_pretrained(str(args.out))
    probe = data["documents"][2]["text"]
    check_same_ids(processor, processor2, [probe], "process_texts")
    batch = processor2.process_texts([probe])
    with torch.inference_mode():
        inner = reloaded.base_model.model(**batch, output_hidden_states=True)
        # The library projects hidden_states[-1]: the language model's output after its norm.
        assert torch.equal(inner.hidden_states[-1], inner.last_hidden_state)
        vecs = reloaded(**batch)[0]
    log_saved(args, model, check_not_degenerate(vecs.float().numpy(), "document d02"))


if __name__ == "__main__":
    main()
