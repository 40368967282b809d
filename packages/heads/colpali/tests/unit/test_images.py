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
    local_file,
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


def test_source_kinds(tmp_path):
    assert source_kind("iVBORw0KGgo=") == BASE64
    assert source_kind("data:image/png;base64,AAAA") == DATA_URL
    assert source_kind("HTTPS://example.com/a.png") == HTTP_URL
    assert source_kind("file:///tmp/a.png") == LOCAL_PATH
    # An absolute path is a local file only inside the allowed folder: base64 otherwise.
    assert source_kind(str(tmp_path / "a.png"), tmp_path) == LOCAL_PATH
    assert source_kind("/tmp/a.png") == BASE64
    assert source_kind("/etc/passwd", tmp_path) == BASE64


def jpeg(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(buffer, format="JPEG")
    return buffer.getvalue()


def test_raw_base64_jpeg_is_an_image_not_a_path(tmp_path):
    """Every base64 JPEG starts with ``/9j/``: it was taken for a local path."""
    encoded = base64.b64encode(jpeg(9, 4)).decode()
    assert encoded.startswith("/9j/")
    for root in (None, tmp_path):
        assert source_kind(encoded, root) == BASE64
    assert open_image(inline_bytes(encoded, ImageLimits()), ImageLimits()).size == (9, 4)


def test_local_files_only_inside_the_allowed_folder(tmp_path):
    (tmp_path / "ok.png").write_bytes(png(3, 2))
    outside = tmp_path.parent / "outside.png"
    outside.write_bytes(png(3, 2))
    assert local_file(str(tmp_path / "ok.png"), tmp_path, 10_000) == png(3, 2)
    assert local_file((tmp_path / "ok.png").as_uri(), tmp_path, 10_000) == png(3, 2)
    for bad in (str(tmp_path / ".." / "outside.png"), outside.as_uri()):
        with pytest.raises(ImageError, match="outside"):
            local_file(bad, tmp_path, 10_000)
    with pytest.raises(ImageError, match="not allowed"):
        local_file(str(tmp_path / "ok.png"), None, 10_000)
    with pytest.raises(ImageError, match="larger than"):
        local_file(str(tmp_path / "ok.png"), tmp_path, 10)


def test_only_the_allowed_formats_are_opened():
    """Pillow opens every format it knows (EPS, PSD, ...) unless told which; a format off
    the list is refused before its parser runs."""
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="PPM")  # a format Pillow reads and writes
    with pytest.raises(ImageError, match="not a decodable image \\(formats: PNG"):
        open_image(buffer.getvalue(), ImageLimits())
    assert open_image(buffer.getvalue(), ImageLimits(formats=("PPM",))).size == (4, 4)
    with pytest.raises(ImageError, match="decodable"):
        open_image(png(4, 4), ImageLimits(formats=("JPEG",)))


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
    monkeypatch.setenv("VLLM_FACTORY_IMAGE_FORMATS", "png, jpeg")
    assert ImageLimits.from_env().max_pixels == 100
    assert ImageLimits.from_env().formats == ("PNG", "JPEG")
    monkeypatch.setenv("VLLM_FACTORY_IMAGE_MAX_BYTES", "0")
    with pytest.raises(ValueError, match="at least 1"):
        ImageLimits.from_env()
