"""The torch-only LFM2-VL image processor (``vllm_factory.heads.colpali.image_processing_lfm2_vl``) and its
registration; no vLLM.

- geometry (smart size, tile grids and their ties, thumbnails), pixel layout (normalisation,
  patch order, padding, masks) and the resize (antialiased, as PIL's reducing bilinear filter)
  checked against hand-computed values and independent computations;
- transformers' own ``Lfm2VlImageProcessor`` source, run with a torch-only stand-in for
  torchvision's functional API whose primitives are the twin's (resize, normalise): every output
  identical, so the twin's tiling, ordering, padding and token geometry are transformers' own
  (CPU hosts; the primitives themselves are compared with torchvision's on a host where it loads);
- where torchvision imports (GPU hosts): transformers' real torchvision processor against the twin
  on generated images, every output tensor identical (``test_twin_matches_torchvision_processor``).
"""

from __future__ import annotations

import enum
import importlib.util
import sys
import types
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
transformers = pytest.importorskip("transformers")

import torch.nn.functional as F
from transformers.image_utils import PILImageResampling
from vllm_factory.heads.colpali import image_processing
from vllm_factory.heads.colpali import image_processing_lfm2_vl as twin

# The tiny test checkpoint's settings (packages/models/collfm2): tiles of 256 px, 16..64 tokens.
TINY = {"tile_size": 256, "min_image_tokens": 16, "max_image_tokens": 64, "min_tiles": 2,
        "max_tiles": 6, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}  # fmt: skip
# transformers' defaults (LFM2-VL's own: tiles of 512 px, 64..256 tokens, 2..10 tiles).
DEFAULTS: dict = {}
NO_SPLIT = {**TINY, "do_image_splitting": False}
SIZES = [(20, 30), (75, 75), (96, 64), (161, 97), (224, 160), (256, 256), (330, 330),
         (400, 320), (400, 400), (513, 287), (640, 512), (900, 60), (1000, 760), (1200, 150),
         (150, 900), (40, 520), (1600, 1200), (2048, 300)]  # fmt: skip


def picture(width: int, height: int, seed: int = 0) -> Image.Image:
    """A deterministic RGB picture: gradients, a checkerboard and noise (fine detail, so that
    resizing filters matter)."""
    rng = np.random.default_rng(seed + width * 7919 + height)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 // max(1, width - 1), y * 255 // max(1, height - 1),
                       ((x // 7 + y // 5) % 2) * 200], axis=-1).astype(np.int32)  # fmt: skip
    pixels += rng.integers(-40, 41, pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def outputs(processor, image: Image.Image) -> dict:
    return dict(processor(image, return_tensors="pt", return_row_col_info=True))


def assert_identical(ours: dict, theirs: dict, what: str) -> None:
    assert ours.keys() == theirs.keys(), what
    for key, value in theirs.items():
        mine = ours[key]
        if isinstance(value, torch.Tensor):
            assert mine.dtype == value.dtype and mine.shape == value.shape, (what, key)
            assert torch.equal(mine, value), (what, key, (mine.float() - value.float()).abs().max())
        else:
            assert mine == value, (what, key)


# -- geometry ------------------------------------------------------------------------------------


def test_round_by_factor_rounds_halves_to_even() -> None:
    assert [twin.round_by_factor(n, 32) for n in (47, 48, 80, 81, 400, 1200)] == [
        32, 64, 64, 96, 384, 1216,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("height", "width", "expected"),
    [
        (30, 20, (160, 128)),  # 16 tokens at least: scaled up by sqrt(16384 / 600), ceil
        (160, 224, (160, 224)),  # 35 tokens: kept
        (256, 256, (256, 256)),  # exactly the 64-token budget: kept
        (760, 1000, (192, 288)),  # scaled down by sqrt(760000 / 65536), floor: 54 tokens
        (60, 900, (64, 896)),  # rounded to 32: 2 x 28 blocks
    ],
)
def test_smart_size(height: int, width: int, expected: tuple[int, int]) -> None:
    assert twin.smart_size(height, width, 16, 2, 16, 64) == expected


def test_tile_grids_and_ties() -> None:
    grids = twin.tile_grids(2, 6)
    assert sorted(grids) == sorted(
        (c, r) for c in range(1, 7) for r in range(1, 7) if 2 <= c * r <= 6
    )
    assert [c * r for c, r in grids] == sorted(c * r for c, r in grids)
    # Aspect 1.25 is as near to 2 x 2 (1.0) as to 3 x 2 (1.5): the larger grid wins only for
    # an image covering more than half of its area (6 tiles of 256 px).
    assert twin.find_closest_aspect_ratio(1.25, grids, 640, 512, 256) == (3, 2)
    assert twin.find_closest_aspect_ratio(1.25, grids, 400, 320, 256) == (2, 2)
    assert twin.find_closest_aspect_ratio(8.0, grids, 1200, 150, 256) == (6, 1)
    assert twin.find_closest_aspect_ratio(1 / 6, grids, 150, 900, 256) == (1, 6)


@pytest.mark.parametrize(
    ("size", "grid", "thumbnail"),
    [
        ((224, 160), (1, 1), None),
        ((20, 30), (1, 1), None),
        ((400, 320), (1, 1), None),  # rounded to 384 x 320: not above twice the budget
        ((640, 512), (3, 2), (224, 256)),  # the tie above; thumbnail at the smart size
        ((1200, 150), (6, 1), (64, 704)),  # 150 x 1200 scaled by sqrt(180000 / 65536), floor
        ((513, 287), (2, 1), (160, 320)),
    ],
)
def test_tiles_thumbnail_and_shapes(size, grid, thumbnail) -> None:
    processor = twin.Lfm2VlImageProcessor(**TINY)
    out = outputs(processor, picture(*size))
    columns, rows = grid
    tiles = columns * rows + (1 if thumbnail else 0)
    assert (out["image_rows"].tolist(), out["image_cols"].tolist()) == ([rows], [columns])
    assert out["pixel_values"].shape == (tiles, 256, 16 * 16 * 3)
    assert out["pixel_values"].dtype == torch.float32
    assert out["pixel_attention_mask"].dtype == torch.int32
    shapes = out["spatial_shapes"].tolist()
    if thumbnail:
        assert shapes[:-1] == [[16, 16]] * (tiles - 1)
        assert shapes[-1] == [thumbnail[0] // 16, thumbnail[1] // 16]
        assert out["image_sizes"].tolist() == [list(thumbnail)]
    else:
        height, width = out["image_sizes"][0].tolist()
        assert shapes == [[height // 16, width // 16]]
    for mask, (h, w), values in zip(
        out["pixel_attention_mask"], shapes, out["pixel_values"], strict=True
    ):
        assert mask[: h * w].eq(1).all() and mask[h * w :].eq(0).all()
        assert values[h * w :].eq(0).all()  # zero patches pad every tile to the budget


def normalised(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 [C, H, W] -> float32 with mean and std 0.5 (127.5 in units of 1 / 255)."""
    return (pixels.float() - 127.5) / 127.5


def patch_rows(image: torch.Tensor) -> torch.Tensor:
    """[C, H, W] -> one row per 16 px patch, patches row by row, each patch's pixels row,
    column, channel (written out with loops, independently of the twin's reshapes)."""
    rows = []
    for top in range(0, image.shape[1], 16):
        for left in range(0, image.shape[2], 16):
            block = image[:, top : top + 16, left : left + 16]
            rows.append(torch.stack([block[:, y, x] for y in range(16) for x in range(16)]))
    return torch.stack(rows).reshape(len(rows), -1)


def test_pixels_are_normalised_patches_row_by_row() -> None:
    image = picture(256, 256)  # the exact budget: not resized
    out = outputs(twin.Lfm2VlImageProcessor(**TINY), image)
    expected = normalised(torch.from_numpy(np.array(image)).permute(2, 0, 1))
    values = out["pixel_values"][0]
    assert torch.equal(values, patch_rows(expected))
    # Spot checks by hand: patch (row 1, column 2) starts with pixel (16, 32), channels R, G, B.
    first = [expected[c, 16, 32] for c in range(3)]
    assert values[1 * 16 + 2, :3].tolist() == [float(v) for v in first]
    red = np.float32(np.array(image)[0, 0, 0])
    assert float(values[0, 0]) == float((red - np.float32(127.5)) / np.float32(127.5))


def test_tiles_are_the_grid_resize_cut_row_by_row_and_the_thumbnail_last() -> None:
    image = picture(640, 512)
    out = outputs(twin.Lfm2VlImageProcessor(**TINY), image)
    batch = torch.from_numpy(np.array(image)).permute(2, 0, 1)[None]
    grid = twin.resize(batch, 512, 768, PILImageResampling.BILINEAR)[0]
    thumb = twin.resize(batch, 224, 256, PILImageResampling.BILINEAR)[0]
    for index in range(6):
        r, c = divmod(index, 3)
        tile = grid[:, r * 256 : (r + 1) * 256, c * 256 : (c + 1) * 256]
        assert torch.equal(out["pixel_values"][index], patch_rows(normalised(tile)))
    assert torch.equal(out["pixel_values"][6, : 14 * 16], patch_rows(normalised(thumb)))


def test_resize_is_antialiased_like_pils_bilinear() -> None:
    image = picture(900, 700)
    batch = torch.from_numpy(np.array(image)).permute(2, 0, 1)[None]
    ours = twin.resize(batch, 210, 300, PILImageResampling.BILINEAR)[0].permute(1, 2, 0)
    pil = torch.from_numpy(np.array(image.resize((300, 210), Image.Resampling.BILINEAR)))
    assert (ours.int() - pil.int()).abs().max() <= 1
    plain = F.interpolate(batch.float(), size=[210, 300], mode="bilinear", align_corners=False)
    plain = plain.round().clamp(0, 255)[0].permute(1, 2, 0)
    assert (plain.int() - pil.int()).abs().max() > 8  # without antialiasing: far off
    assert twin.resize(batch, 700, 900, PILImageResampling.BILINEAR) is batch  # same size
    with pytest.raises(ValueError, match="resample"):
        twin.resize(batch, 10, 10, PILImageResampling.LANCZOS)


def test_settings_save_and_load(tmp_path: Path) -> None:
    processor = twin.Lfm2VlImageProcessor(**TINY)
    processor.save_pretrained(tmp_path)
    again = twin.Lfm2VlImageProcessor.from_pretrained(tmp_path)
    assert again.to_dict() == processor.to_dict()
    assert again.to_dict()["image_processor_type"] == "Lfm2VlImageProcessor"
    assert again.max_num_patches == 256
    image = picture(513, 287)
    assert_identical(outputs(again, image), outputs(processor, image), "reloaded")


def test_registered_where_torchvision_does_not_load(tmp_path: Path) -> None:
    if image_processing.torchvision_usable():
        pytest.skip("torchvision loads here: transformers' own processor is used")
    assert image_processing.use_pil_image_processors() is True
    # (Not ``from transformers import ...``: transformers 5.17 hides the auto class there
    # without torchvision, although its module works.)
    from transformers.models.auto.image_processing_auto import AutoImageProcessor
    from transformers.models.lfm2_vl import image_processing_lfm2_vl as module
    from transformers.models.lfm2_vl import image_processing_lfm2_vl_fast as legacy

    assert module.Lfm2VlImageProcessor is twin.Lfm2VlImageProcessor
    assert legacy.Lfm2VlImageProcessorFast is twin.Lfm2VlImageProcessor
    assert module.find_closest_aspect_ratio is twin.find_closest_aspect_ratio
    assert legacy.round_by_factor is twin.round_by_factor
    twin.Lfm2VlImageProcessor(**TINY).save_pretrained(tmp_path)
    loaded = AutoImageProcessor.from_pretrained(tmp_path)
    assert type(loaded) is twin.Lfm2VlImageProcessor and loaded.tile_size == 256


# -- against transformers' own processor ---------------------------------------------------------


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    LANCZOS = "lanczos"


def torch_only_functional() -> types.ModuleType:
    """Stand-in for ``torchvision.transforms.v2.functional`` with the twin's primitives."""
    to_pil = {mode: PILImageResampling[mode.name] for mode in InterpolationMode}
    functional = types.ModuleType("torchvision.transforms.v2.functional")
    functional.InterpolationMode = InterpolationMode
    functional.resize = lambda image, size, interpolation, antialias=True: twin.resize(
        image, size[0], size[1], to_pil[interpolation]
    )
    functional.normalize = lambda image, mean, std, inplace=False: (
        (image - torch.as_tensor(mean, dtype=image.dtype).view(-1, 1, 1))
        / torch.as_tensor(std, dtype=image.dtype).view(-1, 1, 1)
    )

    def pil_to_tensor(pic: Image.Image) -> torch.Tensor:
        tensor = torch.from_numpy(np.array(pic))
        return tensor.unsqueeze(0) if tensor.ndim == 2 else tensor.permute(2, 0, 1)

    functional.pil_to_tensor = pil_to_tensor
    return functional


@pytest.fixture
def transformers_processor(monkeypatch: pytest.MonkeyPatch):
    """transformers' ``Lfm2VlImageProcessor`` class, its module run with the stand-in."""
    if image_processing.torchvision_usable():
        pytest.skip("torchvision loads here: see test_twin_matches_torchvision_processor")
    source = Path(transformers.__file__).parent / "models/lfm2_vl/image_processing_lfm2_vl.py"
    if not source.is_file():
        pytest.skip(f"transformers {transformers.__version__} has no {source.name}")
    functional = torch_only_functional()
    package = types.ModuleType("torchvision")
    package.transforms = types.ModuleType("torchvision.transforms")
    package.transforms.v2 = types.ModuleType("torchvision.transforms.v2")
    package.transforms.v2.functional = functional
    for module in (package, package.transforms, package.transforms.v2, functional):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    backends = importlib.import_module("transformers.image_processing_backends")
    monkeypatch.setattr(backends, "tvF", functional, raising=False)
    mapping = {PILImageResampling[mode.name]: mode for mode in InterpolationMode}
    monkeypatch.setattr(backends, "pil_torch_interpolation_mapping", mapping, raising=False)
    name = "transformers.models.lfm2_vl._image_processing_lfm2_vl_under_test"
    spec = importlib.util.spec_from_file_location(name, source)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module.Lfm2VlImageProcessor


@pytest.mark.parametrize(
    "settings", [TINY, DEFAULTS, NO_SPLIT], ids=["tiny", "lfm2-vl", "no-split"]
)
def test_twin_follows_transformers_processor(transformers_processor, settings) -> None:
    theirs = transformers_processor(**settings)
    ours = twin.Lfm2VlImageProcessor(**settings)
    assert ours.max_num_patches == theirs.max_num_patches
    for width, height in SIZES:
        image = picture(width, height)
        assert_identical(outputs(ours, image), outputs(theirs, image), f"{width}x{height}")


@pytest.mark.parametrize(
    "settings", [TINY, DEFAULTS, NO_SPLIT], ids=["tiny", "lfm2-vl", "no-split"]
)
def test_twin_matches_torchvision_processor(settings) -> None:
    """Where torchvision loads (GPU hosts): transformers' real processor vs the twin."""
    if not image_processing.torchvision_usable():
        pytest.skip("torchvision does not load here (CPU hosts): the twin is what runs")
    try:
        from transformers.models.lfm2_vl.image_processing_lfm2_vl import (
            Lfm2VlImageProcessor as Real,
        )
    except ImportError:  # transformers before its torchvision processors were renamed
        from transformers.models.lfm2_vl.image_processing_lfm2_vl_fast import (
            Lfm2VlImageProcessorFast as Real,
        )
    theirs, ours = Real(**settings), twin.Lfm2VlImageProcessor(**settings)
    for seed in range(2):
        for width, height in SIZES:
            image = picture(width, height, seed)
            assert_identical(outputs(ours, image), outputs(theirs, image), f"{width}x{height}")
