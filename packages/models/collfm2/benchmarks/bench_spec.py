"""ColLFM2's benchmark spec for ``nox -s bench -- --plugin collfm2 [--workload queries]``: the
ColPali family's spec (:mod:`vllm_factory.testing.colpali.bench`: generated document pages or
text queries, the reference in process) with what is LFM2-VL's own: sauerkrautlm-colpali's
prompts, LFM2-VL's tiling image processor and its FLOPs. vLLM has no LFM2-VL ColPali model, so
there is no native server.

- Checkpoint: ``reference/build_checkpoint.py --size cpu`` on CPU (text 256 wide, 6 layers of
  which 2 attention; vision 256 wide, 4 layers; 256-px tiles of 64 tokens: a 768 x 1024 page is
  2 x 2 tiles and a thumbnail, 317 image tokens) and ``--size bench`` with ``--device cuda``
  (LFM2-VL-450M's shapes: LFM2-350M, SigLIP2 base, projector 2560; 512-px tiles of 256 tokens,
  up to 10 tiles and a thumbnail), the library's 128-wide projection, random weights.
- Image tokens per page: LFM2-VL's own processor (transformers' ``Lfm2VlProcessor`` with core's
  torch-only twin of its image processor) on a blank page of that size: the tile grid depends
  only on the size. The same run gives each tile's patch grid, which the FLOPs need.
- FLOPs per request: the SigLIP2 tower over every tile's patches
  (:func:`vllm_factory.testing.flops.siglip2_flops`), the projector over the pixel-unshuffled
  tokens (layer norm, ``4v -> P -> h``: ``2 t (4v P + P h)``), the LFM2 language model over
  prompt and image tokens (:func:`vllm_factory.testing.flops.lfm2_flops`, causal) and the
  projection ``2 n h dim``.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

from vllm_factory.testing.colpali.bench import (
    ColPaliBenchSpec,
    image_processor_config,
    model_config,
)
from vllm_factory.testing.flops import lfm2_flops, lfm2_shape, siglip2_flops

# sauerkrautlm-colpali 0.1.0's ColLFM2Processor (as the package's IOProcessor states it).
IMAGE_PROMPT = "<|im_start|>user\n<image>Describe the image.<|im_end|>"
IMAGE_PLACEHOLDER = "<image>"
PROJECTION_FILE = "collfm2_projection.pt"


@cache
def image_layout(checkpoint: Path, width: int, height: int) -> tuple[int, tuple[int, ...]]:
    """(tokens, patches of each tile) of a ``width`` x ``height`` image: the tokens its
    ``<image>`` placeholder becomes (tiles, row / column markers, thumbnail, start and end)."""
    from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

    use_pil_image_processors()
    from PIL import Image
    from transformers import AutoTokenizer, Lfm2VlProcessor
    from vllm_factory.heads.colpali.image_processing_lfm2_vl import Lfm2VlImageProcessor

    settings = dict(image_processor_config(checkpoint))
    settings.pop("image_processor_type", None)
    processor = Lfm2VlProcessor(
        image_processor=Lfm2VlImageProcessor(**settings),
        tokenizer=AutoTokenizer.from_pretrained(str(checkpoint)),
    )
    out = processor(text=[IMAGE_PLACEHOLDER], images=[[Image.new("RGB", (width, height))]])
    tiles = tuple(int(h) * int(w) for h, w in out["spatial_shapes"].tolist())
    return len(out["input_ids"][0]), tiles


def lfm2_vl_flops(
    config: dict[str, Any], dim: int, tokens: int, tiles: tuple[int, ...] = ()
) -> dict[str, float]:
    """Matmul FLOPs of one ColLFM2 forward pass over ``tokens`` tokens whose image has tiles of
    ``tiles`` patches (see the module docstring): ``{"vision", "projector", "language",
    "projection", "total"}``."""
    text, vision = config["text_config"], config["vision_config"]
    factor = int(config.get("downsample_factor", 2))
    shape = lfm2_shape(text)
    v, h, p = int(vision["hidden_size"]), shape["hidden"], int(config["projector_hidden_size"])
    # Pixel unshuffle merges factor x factor patches; a tile's grid is padded to a multiple.
    merged = sum(math.ceil(n / factor**2) for n in tiles)
    projector = 2 * merged * (factor * factor * v * p + p * h)
    parts = {
        "vision": siglip2_flops(vision, tiles),
        "projector": float(projector),
        "language": lfm2_flops(shape, tokens),
        "projection": 2.0 * tokens * h * dim,
    }
    return {**parts, "total": sum(parts.values())}


class ColLFM2BenchSpec(ColPaliBenchSpec):
    """Image tokens and tiles from LFM2-VL's own processor."""

    def __init__(self, spec_file: str, **kwargs: Any) -> None:
        super().__init__(spec_file, flops=self.request_flops, **kwargs)
        self.tiles: dict[int, tuple[int, ...]] = {}  # image tokens -> tiles, per page size seen

    def vector_dim(self, checkpoint: Path) -> int:
        """The projection's width, from ``collfm2_projection.pt`` (where the library saves it)."""
        import torch

        saved = torch.load(checkpoint / PROJECTION_FILE, map_location="cpu", weights_only=True)
        return int(saved["custom_text_proj"]["weight"].shape[0])

    def image_tokens_of(self, checkpoint: Path, width: int, height: int) -> int:
        tokens, tiles = image_layout(checkpoint, width, height)
        self.tiles[tokens] = tiles
        return tokens

    def longest_image_tokens(self, checkpoint: Path) -> int:
        """Most tokens an image can become: ``max_tiles`` tiles of the tile's tokens, their
        markers, a thumbnail of ``max_image_tokens`` and the start / end tokens."""
        processor = image_processor_config(checkpoint)
        per_tile = (int(processor["tile_size"]) // int(processor["encoder_patch_size"])
                    // int(processor["downsample_factor"])) ** 2  # fmt: skip
        tiles = int(processor["max_tiles"])
        return tiles * (per_tile + 1) + int(processor["max_image_tokens"]) + 3

    def request_flops(
        self, config: dict[str, Any], dim: int, tokens: int, image_tokens: int
    ) -> dict[str, float]:
        return lfm2_vl_flops(config, dim, tokens, self.tiles.get(image_tokens, ()))

    def shape_notes(self, checkpoint: Path) -> dict[str, Any]:
        config, processor = model_config(checkpoint), image_processor_config(checkpoint)
        return {
            "text_config": {k: config["text_config"].get(k) for k in (
                "hidden_size", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "layer_types")},
            "lfm2_widths": lfm2_shape(config["text_config"]),
            "vision_config": {k: config["vision_config"].get(k) for k in (
                "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "patch_size")},
            "projector_hidden_size": config.get("projector_hidden_size"),
            "image_processor": {k: processor.get(k) for k in (
                "tile_size", "min_image_tokens", "max_image_tokens", "min_tiles", "max_tiles",
                "use_thumbnail", "max_pixels_tolerance")},
            "tiles_per_page_tokens": {str(k): list(v) for k, v in self.tiles.items()},
        }  # fmt: skip


SPEC = ColLFM2BenchSpec(
    __file__,
    image_prompt=IMAGE_PROMPT,
    image_placeholder=IMAGE_PLACEHOLDER,
    reference_library="sauerkrautlm-colpali",
    reference_dists=["sauerkrautlm-colpali"],
)
