"""Draw the ColPali family's test images from a corpus' image specs, deterministically (PIL only).

    python colpali_images.py --corpus corpus.json --out DIR

Each entry of the corpus' ``images`` list is ``{"id", "size": [w, h], "mode", "kind"[, "text"]}``
with ``kind`` one of :data:`KINDS` and ``mode`` a PIL mode PNG can hold (``RGB``, ``RGBA``,
``LA``, ``L``, ``P``, ``1``). Every picture has content that varies across its area (shapes,
text, gradients, noise) so that image patches differ. The random generator of each image is
seeded from its id, so the same spec always gives the same pixels (for one Pillow version: the
default font's rendering can change between releases). Writes ``DIR/NN.png`` (NN: position in
the list) and ``DIR/images.json``: per image its id, file, size, mode and the PNG's sha256.

RGBA images get fully transparent areas whose colour channels still hold a picture:
``Image.convert("RGB")`` (what colpali-engine's processors do) keeps those colours, while a
converter that blends onto a background does not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

LOG = logging.getLogger("colpali_images")
Color = tuple[int, ...]


def _rng(image_id: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(image_id.encode()).digest()[:8], "big"))


def _color(rng: random.Random) -> tuple[int, int, int]:
    return (rng.randrange(256), rng.randrange(256), rng.randrange(256))


def _box(rng: random.Random, w: int, h: int) -> tuple[int, int, int, int]:
    x0, y0 = rng.randrange(w), rng.randrange(h)
    return (x0, y0, min(w - 1, x0 + rng.randint(2, max(3, w // 2))),
            min(h - 1, y0 + rng.randint(2, max(3, h // 2))))  # fmt: skip


def _font(h: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=max(8, min(24, h // 5)))


def shapes(img: Image.Image, rng: random.Random, spec: dict) -> None:
    """Rectangles, ellipses and lines of random colours on a random background."""
    w, h = img.size
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, w, h), fill=_color(rng))
    for i in range(12):
        box, fill = _box(rng, w, h), _color(rng)
        [draw.rectangle, draw.ellipse][i % 2](box, fill=fill, outline=_color(rng))
        draw.line(_box(rng, w, h), fill=_color(rng), width=rng.randint(1, 3))


def text(img: Image.Image, rng: random.Random, spec: dict) -> None:
    """The spec's text, line by line, over a light background with a frame."""
    w, h = img.size
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, w, h), fill=(235, 230, 220))
    draw.rectangle((2, 2, w - 3, h - 3), outline=(40, 40, 90), width=2)
    font = _font(h // max(1, len(spec.get("text", "x").splitlines())))
    draw.multiline_text((6, 6), spec.get("text", spec["id"]), fill=(10, 10, 10), font=font)
    draw.line((6, h - 8, w - 6, h - 8), fill=_color(rng), width=2)


def gradient(img: Image.Image, rng: random.Random, spec: dict) -> None:
    """A horizontal colour gradient crossed by thin stripes every few rows, then the text."""
    w, h = img.size
    a, b = _color(rng), _color(rng)
    draw = ImageDraw.Draw(img)
    for x in range(w):
        t = x / max(1, w - 1)
        draw.line((x, 0, x, h), fill=tuple(round(a[c] * (1 - t) + b[c] * t) for c in range(3)))
    for y in range(rng.randrange(5), h, 5):
        draw.line((0, y, w, y), fill=_color(rng))
    draw.text((4, 2), spec.get("text", ""), fill=(255, 255, 255), font=_font(h))


def stripes(img: Image.Image, rng: random.Random, spec: dict) -> None:
    """Horizontal bands of random height and colour, each with a dot."""
    w, h = img.size
    draw = ImageDraw.Draw(img)
    y = 0
    while y < h:
        band = rng.randint(4, 40)
        draw.rectangle((0, y, w, y + band), fill=_color(rng))
        draw.ellipse((w // 4, y, w // 4 + band, y + band), fill=_color(rng))
        y += band


def chart(img: Image.Image, rng: random.Random, spec: dict) -> None:
    """A bar chart: axes, bars of random heights and colours, a title."""
    w, h = img.size
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, w, h), fill=(255, 255, 255))
    left, bottom = w // 10, h - h // 10
    draw.line((left, h // 10, left, bottom), fill=(0, 0, 0), width=max(1, w // 300))
    draw.line((left, bottom, w - w // 20, bottom), fill=(0, 0, 0), width=max(1, w // 300))
    n = 7
    step = (w - left - w // 20) // n
    for i in range(n):
        top = rng.randint(h // 5, bottom - 2)
        draw.rectangle((left + i * step + step // 5, top, left + (i + 1) * step - step // 5,
                        bottom - 1), fill=_color(rng))  # fmt: skip
    draw.text((left, 2), spec.get("text", ""), fill=(0, 0, 0), font=_font(h))


def checker(img: Image.Image, rng: random.Random, spec: dict) -> None:
    """A checkerboard of random cell size with a diagonal line across it."""
    w, h = img.size
    draw = ImageDraw.Draw(img)
    cell = rng.randint(6, 20)
    a, b = _color(rng), _color(rng)
    for y in range(0, h, cell):
        for x in range(0, w, cell):
            draw.rectangle((x, y, x + cell - 1, y + cell - 1), fill=a if (x + y) // cell % 2 else b)
    draw.line((0, 0, w, h), fill=_color(rng), width=3)


def noise(img: Image.Image, rng: random.Random, spec: dict) -> None:
    """Uniform colour noise in 4x4 blocks."""
    w, h = img.size
    draw = ImageDraw.Draw(img)
    for y in range(0, h, 4):
        for x in range(0, w, 4):
            draw.rectangle((x, y, x + 3, y + 3), fill=_color(rng))


def page(img: Image.Image, rng: random.Random, spec: dict) -> None:
    """A document page: white, a coloured header bar, the spec's lines, a small table."""
    w, h = img.size
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, w, h), fill=(255, 255, 255))
    draw.rectangle((0, 0, w, h // 8), fill=_color(rng))
    lines = spec.get("text", "").splitlines()
    font = _font(h // 2)
    for i, line in enumerate(lines):
        draw.text((10, h // 8 + 6 + i * (h // 10)), line, fill=(20, 20, 20), font=font)
    top = h // 8 + 10 + len(lines) * (h // 10)
    for r in range(4):
        for c in range(3):
            x0, y0 = w // 2 + c * (w // 7), top + r * 14
            draw.rectangle((x0, y0, x0 + w // 7, y0 + 14), outline=(0, 0, 0),
                           fill=_color(rng) if r == 0 else None)  # fmt: skip


KINDS: dict[str, Callable[[Image.Image, random.Random, dict], None]] = {
    f.__name__: f for f in (shapes, text, gradient, stripes, chart, checker, noise, page)
}
# A fixed 16-colour palette for "P" images.
PALETTE = [c for i in range(16) for c in ((i * 53) % 256, (i * 97 + 40) % 256, (i * 151) % 256)]


def draw_image(spec: dict) -> Image.Image:
    """The picture of one spec, in its mode."""
    w, h = spec["size"]
    rng = _rng(spec["id"])
    rgb = Image.new("RGB", (w, h))
    KINDS[spec["kind"]](rgb, rng, spec)
    mode = spec["mode"]
    if mode == "RGB":
        return rgb
    if mode in ("RGBA", "LA"):
        # Alpha: opaque, half transparent and fully transparent areas.
        alpha = Image.new("L", (w, h), 255)
        draw = ImageDraw.Draw(alpha)
        draw.rectangle((0, 0, w // 3, h), fill=0)
        draw.ellipse((w // 2, h // 4, w - 1, 3 * h // 4), fill=128)
        out = rgb.convert("RGBA" if mode == "RGBA" else "LA")
        out.putalpha(alpha)
        return out
    if mode == "P":
        # Map onto the fixed palette without dithering (deterministic, no quantizer).
        pal = Image.new("P", (1, 1))
        pal.putpalette(PALETTE)
        return rgb.quantize(palette=pal, dither=Image.Dither.NONE)
    if mode in ("L", "1"):  # "1": Pillow's default Floyd-Steinberg dithering (deterministic)
        return rgb.convert(mode)
    raise ValueError(f"unsupported image mode {mode!r} in {spec['id']}")


def write_images(specs: list[dict], out: Path) -> list[dict]:
    """Draw every spec into ``out`` (``NN.png`` and ``images.json``); return the index."""
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for i, spec in enumerate(specs):
        img = draw_image(spec)
        assert img.size == tuple(spec["size"]) and img.mode == spec["mode"], spec
        path = out / f"{i:02d}.png"
        img.save(path, format="PNG", optimize=False)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        index.append({"id": spec["id"], "file": path.name, "size": list(img.size),
                      "mode": img.mode, "kind": spec["kind"], "sha256": digest})  # fmt: skip
    (out / "images.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    specs = json.loads(args.corpus.read_text(encoding="utf-8"))["images"]
    index = write_images(specs, args.out)
    LOG.info("wrote %d images to %s", len(index), args.out)


if __name__ == "__main__":
    main()
