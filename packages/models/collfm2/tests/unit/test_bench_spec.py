"""The benchmark spec without vLLM: FLOPs on hand-computed shapes, LFM2-VL's image tokens and
tiles from its own processor, the token budget of the longest image."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from vllm_factory.testing import flops

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_spec

SPEC = bench_spec.SPEC
TEXT = {"hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1,
        "intermediate_size": 12, "block_multiple_of": 4, "block_auto_adjust_ff_dim": True,
        "layer_types": ["conv", "full_attention", "conv"]}  # fmt: skip
VISION = {"hidden_size": 4, "num_hidden_layers": 2, "intermediate_size": 8, "patch_size": 2}
CONFIG = {"text_config": TEXT, "vision_config": VISION, "projector_hidden_size": 6,
          "downsample_factor": 2}  # fmt: skip


def test_lfm2_shape_applies_lfm2s_ffn_adjustment() -> None:
    assert flops.lfm2_shape(TEXT)["intermediate"] == 8  # int(2 * 12 / 3) = 8, a multiple of 4
    real = {"hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8,
            "intermediate_size": 6656, "block_multiple_of": 256,
            "layer_types": ["conv"] * 10 + ["full_attention"] * 6}  # fmt: skip
    shape = flops.lfm2_shape(real)
    assert shape["intermediate"] == 4608 and shape["kv"] == 512
    assert (shape["attention_layers"], shape["conv_layers"], shape["width"]) == (6, 10, 3)


def test_flops_by_hand() -> None:
    n, tiles = 7, (16, 6)  # two tiles: 4 x 4 and 2 x 3 patches of 2 px
    h, i, kv = 8, 8, 4
    language = n * (3 * 6 * h * i + (4 * h * h + 4 * h * kv + 4 * h * (n + 1) / 2)
                    + 2 * (8 * h * h + 2 * h * 3))  # fmt: skip
    vision = sum(2 * p * 12 * 4 + 2 * (8 * p * 16 + 4 * p * 4 * 8 + 4 * p * p * 4) for p in tiles)
    merged = math.ceil(16 / 4) + math.ceil(6 / 4)
    projector = 2 * merged * (4 * 4 * 6 + 6 * h)
    parts = bench_spec.lfm2_vl_flops(CONFIG, 3, n, tiles)
    assert parts["language"] == pytest.approx(language)
    assert parts["vision"] == vision and parts["projector"] == projector
    assert parts["projection"] == 2 * n * h * 3
    assert parts["total"] == pytest.approx(language + vision + projector + 2 * n * h * 3)
    assert bench_spec.lfm2_vl_flops(CONFIG, 3, n)["vision"] == 0  # a text query


def lfm2_vl_checkpoint(folder: Path, processor: dict) -> Path:
    """A tokenizer with LFM2-VL's image tokens and a saved image processor config."""
    folder.mkdir(parents=True)
    words = [
        "[UNK]",
        "<image>",
        "<|image_start|>",
        "<|image_end|>",
        "<|img_thumbnail|>",
        *(f"<|img_row_{r}_col_{c}|>" for r in range(1, 11) for c in range(1, 11)),
    ]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                   extra_special_tokens=words[1:])  # fmt: skip
    fast.save_pretrained(folder)
    settings = {"image_processor_type": "Lfm2VlImageProcessor", "encoder_patch_size": 16,
                "downsample_factor": 2, **processor}  # fmt: skip
    (folder / "processor_config.json").write_text(json.dumps({"image_processor": settings}))
    return folder


@pytest.mark.parametrize(("size", "tiled"), [((768, 1024), True), ((40, 60), False)])
def test_image_tokens_and_tiles_from_the_processor(tmp_path, size, tiled) -> None:
    processor = {"tile_size": 256, "min_image_tokens": 16, "max_image_tokens": 64,
                 "min_tiles": 2, "max_tiles": 4}  # fmt: skip
    checkpoint = lfm2_vl_checkpoint(tmp_path / "ckpt", processor)
    tokens, tiles = bench_spec.image_layout(checkpoint, *size)
    merged = sum(math.ceil(p / 4) for p in tiles)  # one token per 2 x 2 patches
    if tiled:  # 2 x 2 tiles of 16 x 16 patches, their markers, a thumbnail and its marker
        assert tiles[:4] == (256,) * 4 and len(tiles) == 5
        assert tokens == merged + 4 + 1 + 2
    else:
        assert len(tiles) == 1 and tokens == merged + 2
    assert tokens <= SPEC.longest_image_tokens(checkpoint)


def test_longest_image_tokens_holds_the_most_tiles(tmp_path) -> None:
    processor = {"tile_size": 256, "min_image_tokens": 16, "max_image_tokens": 64,
                 "min_tiles": 2, "max_tiles": 4}  # fmt: skip
    checkpoint = lfm2_vl_checkpoint(tmp_path / "ckpt", processor)
    # 4 tiles of 64 tokens and their markers, a thumbnail of 64, start, end, thumbnail marker.
    assert SPEC.longest_image_tokens(checkpoint) == 4 * 65 + 64 + 3
    tokens, _ = bench_spec.image_layout(checkpoint, 2048, 2048)
    assert tokens <= 4 * 65 + 64 + 3


def test_vector_dim_is_the_file_saved_projections(tmp_path) -> None:
    weight = {"weight": torch.zeros(128, 8), "bias": torch.zeros(128)}
    torch.save({"custom_text_proj": weight, "config": {"dim": 128}},
               tmp_path / bench_spec.PROJECTION_FILE)  # fmt: skip
    assert SPEC.vector_dim(tmp_path) == 128


def test_prompt_is_the_io_processors() -> None:
    pytest.importorskip("vllm")
    from vllm_factory.models.collfm2.io_processor import ColLFM2IOProcessor

    assert ColLFM2IOProcessor.image_prompt == bench_spec.IMAGE_PROMPT
    assert bench_spec.IMAGE_PLACEHOLDER in bench_spec.IMAGE_PROMPT
