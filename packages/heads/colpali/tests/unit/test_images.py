"""Image sources, decoding and limits (PIL only)."""

import base64
import io
import random

import pytest
from PIL import Image
from vllm_factory.heads.colpali.images import (
    BASE64,
    DATA_URL,
    HTTP_URL,
    LOCAL_PATH,
    ImageError,
    ImageLimits,
    as_rgb,
    inline_bytes,
    open_image,
    source_kind,
)


def png(width: int, height: int, mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width, height)).save(buffer, format="PNG")
    return buffer.getvalue()


def noise_png() -> bytes:
    buffer = io.BytesIO()
    pixels = random.Random(0).randbytes(32 * 32 * 3)  # incompressible: a long pixel stream
    Image.frombytes("RGB", (32, 32), pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def test_source_kinds():
    assert source_kind("iVBORw0KGgo=") == BASE64
    assert source_kind("data:image/png;base64,AAAA") == DATA_URL
    assert source_kind("HTTPS://example.com/a.png") == HTTP_URL
    assert source_kind("file:///tmp/a.png") == LOCAL_PATH
    assert source_kind("/tmp/a.png") == LOCAL_PATH


def test_raw_base64_and_data_url_decode_to_the_same_bytes():
    raw = png(7, 5)
    encoded = base64.b64encode(raw).decode()
    limits = ImageLimits()
    assert inline_bytes(encoded, limits) == raw
    assert inline_bytes("data:image/png;base64," + encoded, limits) == raw
    image = open_image(raw, limits)
    assert image.size == (7, 5)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("not base64 at all!", "base64"),
        ("data:text/plain;base64,AAAA", "data URL"),
        ("data:image/png,rawbytes", "data URL"),
        ("", "empty"),
    ],
)
def test_bad_inline_images(value, reason):
    with pytest.raises(ImageError, match=reason):
        inline_bytes(value, ImageLimits())


def test_byte_and_pixel_limits():
    raw = png(40, 30)
    with pytest.raises(ImageError, match="larger than"):
        inline_bytes(base64.b64encode(raw).decode(), ImageLimits(max_bytes=len(raw) - 1))
    with pytest.raises(ImageError, match="pixels"):
        open_image(raw, ImageLimits(max_pixels=40 * 30 - 1))
    assert open_image(raw, ImageLimits(max_pixels=40 * 30)).size == (40, 30)


def test_undecodable_bytes_are_refused():
    with pytest.raises(ImageError, match="decodable"):
        open_image(b"\x89PNG\r\n\x1a\n" + b"\0" * 40, ImageLimits())
    with pytest.raises(ImageError, match="decodable"):
        open_image(noise_png()[:300], ImageLimits())  # truncated inside the pixel data


def test_rgb_conversion_drops_alpha_as_pil_does():
    rgba = Image.new("RGBA", (2, 2), (10, 20, 30, 0))
    assert as_rgb(rgba).getpixel((0, 0)) == (10, 20, 30)
    gray = Image.new("L", (2, 2), 77)
    assert as_rgb(gray).mode == "RGB"


def test_limits_from_environment(monkeypatch):
    monkeypatch.setenv("VLLM_FACTORY_IMAGE_MAX_PIXELS", "100")
    assert ImageLimits.from_env().max_pixels == 100
    monkeypatch.setenv("VLLM_FACTORY_IMAGE_MAX_BYTES", "0")
    with pytest.raises(ValueError, match="at least 1"):
        ImageLimits.from_env()
