"""Images as requests send them, decoded and checked; PIL only, no vLLM.

A request names an image in one of four ways: raw base64 of the file, a ``data:image/...;base64,``
URL, an ``http(s)://`` URL, or a local path (``file://`` URL or absolute path). The first two
are decoded here; URLs and paths are fetched by vLLM's own media connector (so
``--allowed-local-media-path`` and ``--allowed-media-domains`` apply as they do to vLLM's chat
API), then checked here the same way.

Limits (environment, read at server start):

- ``VLLM_FACTORY_IMAGE_MAX_BYTES``: largest encoded image, default 20 MiB;
- ``VLLM_FACTORY_IMAGE_MAX_PIXELS``: largest width x height, default 40,000,000 (checked from
  the file header, before the pixels are decoded).
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import warnings
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

BASE64, DATA_URL, HTTP_URL, LOCAL_PATH = "base64", "data", "url", "path"
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_PIXELS = 40_000_000


class ImageError(ValueError):
    """An image the server cannot use; the message says why (for a 400 response)."""


@dataclass(frozen=True)
class ImageLimits:
    max_bytes: int = DEFAULT_MAX_BYTES
    max_pixels: int = DEFAULT_MAX_PIXELS

    @classmethod
    def from_env(cls) -> ImageLimits:
        return cls(
            max_bytes=_positive_int("VLLM_FACTORY_IMAGE_MAX_BYTES", DEFAULT_MAX_BYTES),
            max_pixels=_positive_int("VLLM_FACTORY_IMAGE_MAX_PIXELS", DEFAULT_MAX_PIXELS),
        )


def _positive_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"{name}={raw!r} must be at least 1")
    return value


def source_kind(value: str) -> str:
    """How ``value`` names its image: BASE64, DATA_URL, HTTP_URL or LOCAL_PATH."""
    head = value[:16].lower()
    if head.startswith("data:"):
        return DATA_URL
    if head.startswith(("http://", "https://")):
        return HTTP_URL
    if head.startswith("file:") or value.startswith("/"):
        return LOCAL_PATH
    return BASE64


def inline_bytes(value: str, limits: ImageLimits) -> bytes:
    """The file bytes of a raw-base64 or ``data:`` image."""
    if source_kind(value) == DATA_URL:
        meta, sep, payload = value.partition(",")
        if not sep or ";base64" not in meta.lower() or not meta.lower().startswith("data:image/"):
            raise ImageError("a data URL must read data:image/<type>;base64,<data>")
    else:
        payload = value
    # 4 base64 characters per 3 bytes: refuse oversized input before decoding it.
    if len(payload) > (limits.max_bytes + 2) // 3 * 4 + 4:
        raise ImageError(f"larger than {limits.max_bytes} bytes")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("not valid base64 (nor a data:, http(s):// or file URL)") from None
    if not raw:
        raise ImageError("empty image")
    if len(raw) > limits.max_bytes:
        raise ImageError(f"larger than {limits.max_bytes} bytes")
    return raw


def check_size(width: int, height: int, limits: ImageLimits) -> None:
    if width < 1 or height < 1:
        raise ImageError(f"zero-size image ({width}x{height})")
    if width * height > limits.max_pixels:
        raise ImageError(f"{width}x{height} pixels is more than the limit of {limits.max_pixels}")


def open_image(raw: bytes, limits: ImageLimits) -> Image.Image:
    """Decode an image file's bytes, refusing what is not an image or is too large (checked on
    the header, before the pixels are decoded)."""
    try:
        with warnings.catch_warnings():
            # PIL warns above its own pixel limit; ours (checked next) is the one that counts.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw))
            check_size(image.width, image.height, limits)
            image.load()
    except ImageError:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError):
        raise ImageError("not a decodable image") from None
    except (OSError, ValueError, SyntaxError) as error:
        raise ImageError(f"not a decodable image ({error})") from None
    return image


def as_rgb(image: Image.Image) -> Image.Image:
    """RGB as the reference processors make it (``Image.convert("RGB")``: alpha dropped)."""
    return image if image.mode == "RGB" else image.convert("RGB")
