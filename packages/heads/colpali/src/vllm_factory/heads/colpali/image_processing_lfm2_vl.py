"""LFM2-VL's image processor in torch alone (no torchvision): the twin of transformers'
``Lfm2VlImageProcessor`` (``models/lfm2_vl/image_processing_lfm2_vl.py``, called
``Lfm2VlImageProcessorFast`` before transformers 5), which only exists as a torchvision
processor. :func:`vllm_factory.heads.colpali.image_processing.use_pil_image_processors` registers this
module under that module's names where torchvision cannot be imported; with a working torchvision
transformers' own processor runs.

What it computes, per image (``H x W``, RGB, uint8):

- the "smart" size: both sides multiples of ``encoder_patch_size * downsample_factor`` (at least
  one such block), the pixel count brought into ``[min_image_tokens, max_image_tokens]`` tokens
  of ``(encoder_patch_size * downsample_factor)**2`` pixels, the aspect ratio kept;
- an image larger than ``max_pixels_tolerance`` times the token budget (with splitting on) is
  resized to a grid of ``tile_size`` tiles (the grid among ``min_tiles..max_tiles`` tiles whose
  aspect ratio is closest to the image's) and cut into tiles, row by row, plus a thumbnail at
  the smart size (``use_thumbnail``); any other image is resized to its smart size;
- each tile: rescaled and normalised (``(x - mean * 255) / (std * 255)`` in float32), cut into
  ``encoder_patch_size`` patches (row-major; each patch's pixels row, column, channel), padded
  with zero patches to ``max_num_patches`` with a ``pixel_attention_mask`` of ones then zeros,
  and its ``spatial_shapes`` (patch rows, patch columns).

Resizing is torchvision's tensor resize, which is ``torch.nn.functional.interpolate`` with
antialiasing for bilinear / bicubic: on the uint8 image directly where torchvision does so on a
CPU (bilinear with AVX2 / AVX512, bicubic always), else in float32, rounded back to uint8.
Inputs: PIL images (any mode; converted as transformers converts them when ``do_convert_rgb``)
or uint8 arrays / tensors with 1 or 3 channels.
"""

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature
from transformers.image_transforms import convert_to_rgb
from transformers.image_utils import (
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    ChannelDimension,
    PILImageResampling,
    infer_channel_dimension_format,
)
from transformers.processing_utils import ImagesKwargs

__all__ = [
    "Lfm2VlImageProcessor",
    "Lfm2VlImageProcessorKwargs",
    "find_closest_aspect_ratio",
    "round_by_factor",
]

# PIL resampling filter -> interpolate mode (those torchvision's tensor resize maps them to).
MODES = {
    PILImageResampling.NEAREST: "nearest",
    PILImageResampling.BILINEAR: "bilinear",
    PILImageResampling.BICUBIC: "bicubic",
}


def round_by_factor(number: float, factor: int) -> int:
    """The multiple of ``factor`` nearest to ``number`` (Python's ``round``: ties to even)."""
    return round(number / factor) * factor


def find_closest_aspect_ratio(
    aspect_ratio: float,
    target_ratios: list[tuple[int, int]],
    width: int,
    height: int,
    image_size: int,
) -> tuple[int, int]:
    """The ``(columns, rows)`` grid of ``target_ratios`` whose ratio is nearest to
    ``aspect_ratio`` (width / height). Among equally near grids, a later one replaces the one
    chosen so far when the image covers more than half of that grid's area in ``image_size``
    tiles."""
    chosen, nearest = (1, 1), math.inf
    for columns, rows in target_ratios:
        distance = abs(aspect_ratio - columns / rows)
        if distance < nearest:
            chosen, nearest = (columns, rows), distance
        elif distance == nearest:
            grid_area = image_size * image_size * columns * rows
            if width * height > 0.5 * grid_area:
                chosen = (columns, rows)
    return chosen


def tile_grids(min_tiles: int, max_tiles: int) -> list[tuple[int, int]]:
    """Every ``(columns, rows)`` grid of ``min_tiles..max_tiles`` tiles, by tile count. Built as
    transformers builds it (a set made from the same sequence, then a stable sort): grids of
    equal count keep that set's order, which decides between equally near grids."""
    grids = [
        (columns, rows)
        for n in range(min_tiles, max_tiles + 1)
        for columns in range(1, n + 1)
        for rows in range(1, n + 1)
        if min_tiles <= columns * rows <= max_tiles
    ]
    return sorted(set(grids), key=lambda grid: grid[0] * grid[1])


def smart_size(
    height: int, width: int, patch: int, factor: int, min_tokens: int, max_tokens: int
) -> tuple[int, int]:
    """``(height, width)``: multiples of ``patch * factor`` near the image's, scaled into
    ``[min_tokens, max_tokens]`` tokens of ``(patch * factor)**2`` pixels."""
    block = patch * factor
    low, high = min_tokens * block * block, max_tokens * block * block
    new_h = max(block, round_by_factor(height, block))
    new_w = max(block, round_by_factor(width, block))
    if new_h * new_w > high:
        beta = math.sqrt((height * width) / high)
        new_h = max(block, math.floor(height / beta / block) * block)
        new_w = max(block, math.floor(width / beta / block) * block)
    elif new_h * new_w < low:
        beta = math.sqrt(low / (height * width))
        new_h = math.ceil(height * beta / block) * block
        new_w = math.ceil(width * beta / block) * block
    return new_h, new_w


def too_large_for_one_tile(
    height: int, width: int, patch: int, factor: int, max_tokens: int, tolerance: float
) -> bool:
    """Whether the image, at its rounded size, exceeds ``tolerance`` times the token budget."""
    block = patch * factor
    rounded_h = max(patch, round_by_factor(height, block))
    rounded_w = max(patch, round_by_factor(width, block))
    return rounded_h * rounded_w > max_tokens * block * block * tolerance


def resize(image: torch.Tensor, height: int, width: int, resample: Any) -> torch.Tensor:
    """``image`` ([N, C, H, W]) at ``height x width`` as torchvision's tensor resize makes it."""
    if tuple(image.shape[-2:]) == (height, width):
        return image
    if resample is None:
        resample = PILImageResampling.BILINEAR
    try:
        mode = MODES[PILImageResampling(resample)]
    except (KeyError, ValueError):
        raise ValueError(
            f"resample={resample!r}: the torchvision-free LFM2-VL image processor supports "
            f"{sorted(m.name for m in MODES)}"
        ) from None
    smooth = mode != "nearest"
    native = image.dtype == torch.uint8 and (
        mode == "nearest"
        or (
            image.device.type == "cpu"
            and (mode == "bicubic" or torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"))
        )
    )
    values = image if native or image.dtype in (torch.float32, torch.float64) else image.float()
    out = F.interpolate(
        values,
        size=[height, width],
        mode=mode,
        align_corners=False if smooth else None,
        antialias=smooth,
    )
    if values.dtype != image.dtype:
        if mode == "bicubic" and image.dtype == torch.uint8:
            out = out.clamp_(min=0, max=255)
        if not image.dtype.is_floating_point:
            out = out.round_()
        out = out.to(image.dtype)
    return out


def to_patches(image: torch.Tensor, patch: int) -> torch.Tensor:
    """[C, H, W] -> [(H / patch) * (W / patch), patch * patch * C], patches row by row."""
    channels, height, width = image.shape
    grid = image.reshape(channels, height // patch, patch, width // patch, patch)
    return grid.permute(1, 3, 2, 4, 0).reshape((height // patch) * (width // patch), -1)


class Lfm2VlImageProcessorKwargs(ImagesKwargs, total=False):
    """The LFM2-VL settings (``preprocessor_config.json`` / ``processor_config.json`` keys)."""

    downsample_factor: int
    do_image_splitting: bool
    min_tiles: int
    max_tiles: int
    use_thumbnail: bool
    min_image_tokens: int
    max_image_tokens: int
    encoder_patch_size: int
    tile_size: int
    max_pixels_tolerance: float
    do_pad: bool
    return_row_col_info: bool


class Lfm2VlImageProcessor(BaseImageProcessor):
    """transformers' ``Lfm2VlImageProcessor`` without torchvision (same name, settings, saved
    config and outputs: ``pixel_values`` [tiles, max_num_patches, patch * patch * 3] float32,
    ``pixel_attention_mask`` [tiles, max_num_patches] int32, ``spatial_shapes`` [tiles, 2];
    with ``return_row_col_info`` also ``image_rows``, ``image_cols``, ``image_sizes``)."""

    downsample_factor = 2
    do_image_splitting = True
    min_tiles = 2
    max_tiles = 10
    use_thumbnail = True
    min_image_tokens = 64
    max_image_tokens = 256
    encoder_patch_size = 16
    tile_size = 512
    max_pixels_tolerance = 2.0
    do_resize = True
    size = {"height": 512, "width": 512}  # noqa: RUF012 - transformers' class-level default
    resample = PILImageResampling.BILINEAR
    do_rescale = True
    rescale_factor = 1 / 255
    do_normalize = True
    do_pad = True
    return_row_col_info = False
    image_mean = IMAGENET_STANDARD_MEAN
    image_std = IMAGENET_STANDARD_STD
    valid_kwargs = Lfm2VlImageProcessorKwargs
    model_input_names = ["pixel_values", "pixel_attention_mask", "spatial_shapes"]  # noqa: RUF012

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._set_attributes(**kwargs)
        self.max_num_patches = self.patch_budget(
            self.max_image_tokens, self.downsample_factor, self.tile_size,
            self.encoder_patch_size, self.do_image_splitting,
        )  # fmt: skip

    @staticmethod
    def patch_budget(
        max_image_tokens: int, factor: int, tile_size: int, patch: int, splitting: bool
    ) -> int:
        """Patches every tile is padded to: a full-budget image's or a full tile's."""
        return max(max_image_tokens * factor**2, (tile_size // patch) ** 2 if splitting else 0)

    def process_image(
        self,
        image: Any,
        do_convert_rgb: bool | None = None,
        input_data_format: str | ChannelDimension | None = None,
        device: torch.device | str | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """One input image as a [C, H, W] tensor (uint8 for PIL images and uint8 arrays)."""
        if isinstance(image, Image.Image):
            if do_convert_rgb:
                image = convert_to_rgb(image)
            tensor = torch.from_numpy(np.array(image))
            tensor = tensor.unsqueeze(0) if tensor.ndim == 2 else tensor.permute(2, 0, 1)
        else:
            tensor = torch.from_numpy(image) if isinstance(image, np.ndarray) else image
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"unsupported image type {type(image).__name__}")
            if tensor.ndim == 2:
                tensor = tensor.unsqueeze(0)
            elif (
                input_data_format or infer_channel_dimension_format(tensor)
            ) == ChannelDimension.LAST:
                tensor = tensor.permute(2, 0, 1)
            if do_convert_rgb and tensor.shape[0] == 1:
                tensor = tensor.expand(3, -1, -1)
            elif do_convert_rgb and tensor.shape[0] != 3:
                raise ValueError(
                    f"{tensor.shape[0]}-channel arrays are not converted to RGB here; pass RGB"
                )
        tensor = tensor.contiguous()
        return tensor if device is None else tensor.to(device)

    def _tiles(self, image: torch.Tensor, options: dict[str, Any]) -> tuple[list, int, int, list]:
        """One image [C, H, W] -> its tiles (uint8, thumbnail last), rows, columns and the
        smart ``[height, width]``."""
        patch, factor = options["encoder_patch_size"], options["downsample_factor"]
        min_tiles, max_tiles = options["min_tiles"], options["max_tiles"]
        if not options["do_image_splitting"]:
            min_tiles = max_tiles = 1
        elif min_tiles > max_tiles:
            raise ValueError("min_tiles must be less than or equal to max_tiles")
        height, width = image.shape[-2:]
        new_h, new_w = smart_size(
            height, width, patch, factor, options["min_image_tokens"], options["max_image_tokens"]
        )
        batch = image.unsqueeze(0)
        resample = options["resample"]
        splitting = not min_tiles == max_tiles == 1
        large = too_large_for_one_tile(
            height, width, patch, factor, options["max_image_tokens"],
            options["max_pixels_tolerance"],
        )  # fmt: skip
        if not (large and splitting):
            return [resize(batch, new_h, new_w, resample)[0]], 1, 1, [new_h, new_w]
        tile = options["tile_size"]
        columns, rows = find_closest_aspect_ratio(
            width / height, tile_grids(min_tiles, max_tiles), width, height, tile
        )
        grid = resize(batch, tile * rows, tile * columns, resample)[0]
        tiles = [
            grid[:, r * tile : (r + 1) * tile, c * tile : (c + 1) * tile]
            for r in range(rows)
            for c in range(columns)
        ]
        if options["use_thumbnail"] and columns * rows != 1:
            tiles.append(resize(batch, new_h, new_w, resample)[0])
        return tiles, rows, columns, [new_h, new_w]

    def _normalized(self, tile: torch.Tensor, options: dict[str, Any]) -> torch.Tensor:
        """Rescale and normalise as transformers does it (one fused float32 step)."""
        scale = options["rescale_factor"]
        if options["do_normalize"]:
            mean = torch.tensor(options["image_mean"], device=tile.device)
            std = torch.tensor(options["image_std"], device=tile.device)
            if options["do_rescale"]:
                mean, std = mean * (1.0 / scale), std * (1.0 / scale)
            values = tile.to(torch.float32)
            mean = mean.to(values.dtype).reshape(-1, 1, 1)
            std = std.to(values.dtype).reshape(-1, 1, 1)
            return (values - mean) / std
        return tile * scale if options["do_rescale"] else tile

    def _preprocess(self, images: list[torch.Tensor], **options: Any) -> BatchFeature:
        patch = options["encoder_patch_size"]
        budget = self.patch_budget(
            options["max_image_tokens"], options["downsample_factor"], options["tile_size"],
            patch, options["do_image_splitting"],
        )  # fmt: skip
        pad = options["do_pad"]
        pixel_values, masks, shapes = [], [], []
        rows_of, columns_of, sizes_of = [], [], []
        for image in images:
            tiles, rows, columns, size = self._tiles(image, options)
            rows_of.append(rows)
            columns_of.append(columns)
            sizes_of.append(size)
            patched = []
            for tile in tiles:
                height, width = tile.shape[-2:]
                patches = to_patches(self._normalized(tile, options), patch)
                shapes.append([height // patch, width // patch])
                if pad:
                    mask = torch.ones((budget,), dtype=torch.int32)
                    missing = budget - patches.shape[0]
                    if missing > 0:
                        patches = F.pad(patches, (0, 0, 0, missing))
                        mask[-missing:] = 0
                    masks.append(mask)
                patched.append(patches)
            pixel_values.append(torch.stack(patched))
        data: dict[str, Any] = {"pixel_values": torch.cat(pixel_values)}
        if pad:
            data["pixel_attention_mask"] = torch.stack(masks)
            data["spatial_shapes"] = torch.tensor(shapes)
        if options["return_row_col_info"]:
            data.update(image_rows=rows_of, image_cols=columns_of, image_sizes=sizes_of)
        return BatchFeature(data=data, tensor_type=options.get("return_tensors"))
