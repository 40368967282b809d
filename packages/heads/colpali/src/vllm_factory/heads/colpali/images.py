"""Images as requests send them, decoded and checked; PIL only, no vLLM.

A request names an image in one of four ways: raw base64 of the file, a ``data:image/...;base64,``
URL, an ``http(s)://`` URL, or a local file (a ``file://`` URL, or an absolute path inside the
server's ``--allowed-local-media-path``). The first two are decoded here; URLs are fetched under
the server's media policy (:mod:`~vllm_factory.heads.colpali.fetch`), local files read here if
the server allows local media (as vLLM's chat API does). A string that starts with ``/`` but lies
outside the allowed folder is base64 (every base64 JPEG starts with ``/9j/``).

Limits (:mod:`vllm_factory.core.envs`, read at server start): the encoded size of each image
(``VLLM_FACTORY_IMAGE_MAX_BYTES``), its pixels (``VLLM_FACTORY_IMAGE_MAX_PIXELS``) and the pixels
of all images of a request (``VLLM_FACTORY_REQUEST_MAX_PIXELS``), both checked from the file
headers before any pixel is decoded, and the formats Pillow may open
(``VLLM_FACTORY_IMAGE_FORMATS``).
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError
from vllm_factory.core import envs

BASE64, DATA_URL, HTTP_URL, LOCAL_PATH = "base64", "data", "url", "path"


class ImageError(ValueError):
    """An image the server cannot use; the message says why (for a 400 response)."""


@dataclass(frozen=True)
class ImageLimits:
    max_bytes: int = envs.IMAGE_MAX_BYTES.default
    max_pixels: int = envs.IMAGE_MAX_PIXELS.default
    request_pixels: int = envs.REQUEST_MAX_PIXELS.default
    formats: tuple[str, ...] = envs.IMAGE_FORMATS.default

    @classmethod
    def from_env(cls) -> ImageLimits:
        return cls(
            max_bytes=envs.get(envs.IMAGE_MAX_BYTES),
            max_pixels=envs.get(envs.IMAGE_MAX_PIXELS),
            request_pixels=envs.get(envs.REQUEST_MAX_PIXELS),
            formats=envs.get(envs.IMAGE_FORMATS),
        )


def source_kind(value: str, local_root: Path | None = None) -> str:
    """How ``value`` names its image: BASE64, DATA_URL, HTTP_URL or LOCAL_PATH (a ``file:`` URL,
    or an absolute path inside ``local_root``, the server's allowed local media folder)."""
    head = value[:16].lower()
    if head.startswith("data:"):
        return DATA_URL
    if head.startswith(("http://", "https://")):
        return HTTP_URL
    if head.startswith("file:"):
        return LOCAL_PATH
    if local_root is not None and value.startswith("/") and _inside(value, local_root):
        return LOCAL_PATH
    return BASE64


def _inside(path: str, root: Path) -> bool:
    try:
        return Path(path).resolve().is_relative_to(root)
    except (OSError, ValueError):
        return False


def local_file(value: str, local_root: Path | None, max_bytes: int) -> bytes:
    """The bytes of a local image (``file:`` URL or absolute path) inside ``local_root``."""
    if local_root is None:
        raise ImageError("local files are not allowed on this server (--allowed-local-media-path)")
    path = value[len("file://") :] if value.lower().startswith("file://") else value
    if value.lower().startswith("file:") and not value.lower().startswith("file://"):
        path = value[len("file:") :]
    if not _inside(path, local_root):
        raise ImageError("is outside the server's allowed local media folder")
    try:
        with open(Path(path).resolve(), "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError:
        raise ImageError("could not be read") from None
    if len(raw) > max_bytes:
        raise ImageError(f"larger than {max_bytes} bytes")
    return raw


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


def open_header(raw: bytes, limits: ImageLimits) -> Image.Image:
    """An image file opened in one of the allowed formats, its size checked, its pixels not yet
    decoded."""
    try:
        with warnings.catch_warnings():
            # PIL warns above its own pixel limit; ours (checked next) is the one that counts.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw), formats=limits.formats)
    except (UnidentifiedImageError, Image.DecompressionBombError):
        raise ImageError(f"not a decodable image (formats: {', '.join(limits.formats)})") from None
    except (OSError, ValueError, SyntaxError) as error:
        raise ImageError(f"not a decodable image ({error})") from None
    check_size(image.width, image.height, limits)
    return image


def decode(image: Image.Image) -> Image.Image:
    """The pixels of an image :func:`open_header` opened, RGB as the reference processors make
    it (``Image.convert("RGB")``: alpha dropped)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
        raise ImageError(f"not a decodable image ({error})") from None
    return image if image.mode == "RGB" else image.convert("RGB")


def open_image(raw: bytes, limits: ImageLimits) -> Image.Image:
    """Decode an image file's bytes, refusing what is not an image or is too large (checked on
    the header, before the pixels are decoded); RGB."""
    return decode(open_header(raw, limits))


def as_rgb(image: Image.Image) -> Image.Image:
    """RGB as the reference processors make it (``Image.convert("RGB")``: alpha dropped)."""
    return image if image.mode == "RGB" else image.convert("RGB")
