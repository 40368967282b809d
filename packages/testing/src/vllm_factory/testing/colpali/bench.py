"""The ColPali family's benchmark spec: a ColPali package's ``benchmarks/bench_spec.py`` is
``SPEC = ColPaliBenchSpec(__file__, ...)`` with its processor's prompts and its FLOPs formula
(``nox -s bench -- --plugin NAME [--workload pages|queries]``).

- Checkpoint: the package's random checkpoint (its ``reference/build_checkpoint.py``) at size
  ``cpu`` on CPU and ``bench`` (real width) with ``--device cuda``, built once by
  colpali-engine in its venv (or ``--ref-python``) and cached under
  ``.artifacts/<package>-bench/``; ``--checkpoint`` serves another one.
- Workloads (``--workload``): ``pages`` (the default): one generated document page per request
  (:func:`draw_page`: 768 x 1024, 816 x 1056 or 794 x 1123 pixels, a title, paragraphs, a chart
  and a table; seeded, PIL only, cached as PNG files), its image tokens set by the checkpoint's
  own image processor; ``queries``: one short text query per request (8 - 32 tokens of seeded
  words, plus the processor's query augmentation).
- Servers, plugin first (so that native's vectors are compared with the plugin's before native
  is timed): the plugin as a user starts it (``--config-format colpali``), ``{"data": {"image":
  <base64 PNG>}}`` or ``{"data": {"text": q, "is_query": true}}``; vLLM's native model
  (``ColQwen3Model`` for a colpali-engine ColQwen3 checkpoint), ``POST /pooling`` with ``"task":
  "token_embed"``: pages as a chat message holding the page as a ``data:`` URL, rendered by a
  chat template that writes the processor's image prompt exactly (:func:`native_chat_template`),
  queries as ``{"input": q + augmentation}``. Native needs ``dim`` in its config
  (``--hf-overrides``): without it vLLM 0.32 fails to load a colpali-engine checkpoint
  (``custom_text_proj.bias`` not initialised), with it the projection has no bias (the bench
  checkpoints' bias is zero, so both compute the same vectors). Both servers get
  ``--mm-processor-cache-gb 0``: every page of a real load is new, so vLLM's image cache must not
  save the preprocessing of the corpus' repeats.
- What each server returned for the first requests goes into the report: tokens and image
  tokens per request, whether the plugin's counts equal the corpus', and native's largest
  difference from the plugin's vectors (``matches_plugin``).
- Reference: the package's reference in process, in its own venv (the shared baseline,
  ``--library colpali-engine`` with the reference's model and processor classes, which may
  live in the package's ``reference/``): ``process_images`` (pages opened from their PNG
  files) or ``process_queries``, then the model, at batch size 1 and the batch-size sweep.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import json
import logging
import random
import struct
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont
from vllm_factory.testing.bench import (
    BenchConfig,
    Corpus,
    PluginSpec,
    ServerSpec,
    bench_artifacts,
    build_corpus,
    encoding_fields,
    word_pool,
)
from vllm_factory.testing.colbert.bench import check_native  # vLLM's token_embed answer
from vllm_factory.testing.colpali.references import KIT_INPUTS
from vllm_factory.testing.refenv import GivenPython, cached_artifact, package_reference

logger = logging.getLogger(__name__)

SEED = 0
WORKLOADS = ("pages", "queries")
PAGE_SIZES = ((768, 1024), (816, 1056), (794, 1123))
"""Page sizes in pixels: 8 x 10.7 in, US letter and A4 at 96 dpi."""
QUERY_LENGTHS = {"short": 1.0}
"""Query workload: 8 - 32 tokens of words (the bench's ``short`` bucket) before augmentation."""
MATCH_COSINE = 0.999
"""Native matches the plugin when every token vector has at least this cosine with the
plugin's (bf16 rounding of two batchings of the same model stays far above it)."""
SIZE_FOR_DEVICE = {"cpu": "cpu", "cuda": "bench"}
NATIVE_ARGS = ("--chat-template-content-format", "openai")
SERVER_ARGS = ("--mm-processor-cache-gb", "0")


# -- pages --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _phrase(rng: random.Random, words: Sequence[str], low: int, high: int) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(low, high)))


def _wrap(draw: ImageDraw.ImageDraw, text: str, font: Any, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if line and draw.textlength(candidate, font=font) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    return [*lines, line] if line else lines


def _paragraph(draw, rng, words, box: tuple[int, int, int, int]) -> int:
    """Justified-ish body text in ``box`` (x0, y0, x1, y1); returns the height used."""
    x0, y0, x1, y1 = box
    font, step = _font(15), 21
    lines = _wrap(draw, _phrase(rng, words, 30, 110).capitalize() + ".", font, x1 - x0)
    lines = lines[: max(0, (y1 - y0) // step)]
    for i, line in enumerate(lines):
        draw.text((x0, y0 + i * step), line, fill=(25, 25, 25), font=font)
    return len(lines) * step


# Axes, ticks and caption: the least room a chart needs (the page loop stops 60 px before the
# bottom margin, so the last box can be too short for one).
CHART_MIN_HEIGHT = 120


def _chart(draw, rng, words, box: tuple[int, int, int, int], number: int) -> int:
    """A bar or line chart with axes, ticks, a legend and a caption; returns the height used."""
    x0, y0, x1, y1 = box
    height = min(y1 - y0, rng.randint(190, 270))
    left, bottom, top = x0 + 40, y0 + height - 42, y0 + 10
    draw.line((left, top, left, bottom), fill=(0, 0, 0), width=2)
    draw.line((left, bottom, x1, bottom), fill=(0, 0, 0), width=2)
    for k in range(5):
        y = bottom - k * (bottom - top) // 4
        draw.line((left - 5, y, left, y), fill=(0, 0, 0))
        draw.text((x0, y - 7), str(k * 25), fill=(60, 60, 60), font=_font(11))
    series = rng.randint(1, 3)
    colors = [(rng.randrange(200), rng.randrange(200), rng.randrange(200)) for _ in range(series)]
    n = rng.randint(5, 12)
    step = (x1 - left - 10) // n
    if rng.random() < 0.5:  # grouped bars
        bar = max(2, step // (series + 1))
        for i in range(n):
            for s in range(series):
                value = rng.randint(top + 5, bottom - 2)
                x = left + 6 + i * step + s * bar
                draw.rectangle((x, value, x + bar - 2, bottom - 1), fill=colors[s])
    else:  # lines with markers
        for s in range(series):
            points = [(left + 10 + i * step, rng.randint(top + 5, bottom - 5)) for i in range(n)]
            draw.line(points, fill=colors[s], width=2)
            for x, y in points:
                draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=colors[s])
    for i in range(n):
        draw.text((left + 6 + i * step, bottom + 4), f"Q{i % 4 + 1}", fill=(60, 60, 60),
                  font=_font(11))  # fmt: skip
    for s in range(series):
        lx = x1 - 130
        draw.rectangle((lx, top + s * 16, lx + 10, top + s * 16 + 10), fill=colors[s])
        draw.text((lx + 14, top + s * 16 - 2), rng.choice(words)[:14], fill=(0, 0, 0),
                  font=_font(11))  # fmt: skip
    caption = f"Figure {number}: {_phrase(rng, words, 4, 10)}"
    draw.text((x0, bottom + 22), caption, fill=(40, 40, 40), font=_font(13))
    return height


def _table(draw, rng, words, box: tuple[int, int, int, int], number: int) -> int:
    """A ruled table with a shaded header row and numbers; returns the height used."""
    x0, y0, x1, y1 = box
    rows, cols, step = rng.randint(4, 9), rng.randint(3, 5), 22
    rows = max(2, min(rows, (y1 - y0 - 24) // step))
    width = (x1 - x0) // cols
    draw.text((x0, y0), f"Table {number}: {_phrase(rng, words, 3, 8)}", fill=(40, 40, 40),
              font=_font(13))  # fmt: skip
    top = y0 + 20
    draw.rectangle((x0, top, x1, top + step), fill=(215, 225, 240))
    for r in range(rows + 1):
        draw.line((x0, top + r * step, x1, top + r * step), fill=(90, 90, 90))
    for c in range(cols + 1):
        x = min(x0 + c * width, x1)
        draw.line((x, top, x, top + rows * step), fill=(90, 90, 90))
    for r in range(rows):
        for c in range(cols):
            if r == 0:
                cell = rng.choice(words)[:12].capitalize()
            elif c == 0:
                cell = rng.choice(words)[:12]
            else:
                cell = f"{rng.uniform(0, 1000):,.1f}"
            draw.text((x0 + c * width + 5, top + r * step + 4), cell, fill=(10, 10, 10),
                      font=_font(13))  # fmt: skip
    return 20 + rows * step


def draw_page(index: int, seed: int, words: Sequence[str]) -> Image.Image:
    """Page ``index`` of the seeded set ``seed``: a title, then paragraphs, charts and tables
    until the page is full, a page number. The same arguments give the same pixels (for one
    Pillow version: its bundled font renders the text)."""
    rng = random.Random(f"colpali-bench-page-{seed}-{index}")
    w, h = PAGE_SIZES[rng.randrange(len(PAGE_SIZES))]
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    margin = w // 12
    x0, x1, bottom = margin, w - margin, h - margin
    y = margin
    draw.text((x0, y), _phrase(rng, words, 3, 8).title(), fill=(15, 20, 60), font=_font(26))
    y += 38
    draw.line((x0, y, x1, y), fill=(15, 20, 60), width=2)
    y += 14
    kinds = ["paragraph", "chart", "paragraph", "table"]
    figures = tables = 0
    while y < bottom - 60:
        kind = kinds.pop(0) if kinds else rng.choice(["paragraph", "paragraph", "chart", "table"])
        box = (x0, y, x1, bottom)
        if kind == "paragraph":
            used = _paragraph(draw, rng, words, box)
        elif kind == "chart" and bottom - y >= CHART_MIN_HEIGHT:
            figures += 1
            used = _chart(draw, rng, words, box, figures)
        elif kind == "table":
            tables += 1
            used = _table(draw, rng, words, box, tables)
        else:  # a chart with no room left for its axes: text instead
            used = _paragraph(draw, rng, words, box)
        y += used + 16
    draw.text((w // 2 - 10, h - margin // 2 - 8), str(index + 1), fill=(80, 80, 80), font=_font(12))
    return img


def write_pages(folder: Path, count: int, seed: int, words: Sequence[str]) -> list[Path]:
    """``count`` pages as ``folder/NNNN.png`` plus ``pages.json`` (size and sha256 of each)."""
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for i in range(count):
        path = folder / f"{i:04d}.png"
        draw_page(i, seed, words).save(path, format="PNG")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        with Image.open(path) as img:
            index.append({"file": path.name, "size": list(img.size), "sha256": digest})
    (folder / "pages.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return [folder / entry["file"] for entry in index]


@cache
def image_b64(path: str) -> str:
    """The file's bytes in base64 (cached: the load generator sends each page many times)."""
    return base64.b64encode(Path(path).read_bytes()).decode("ascii")


# -- the checkpoint's processor -----------------------------------------------------------------


@cache
def image_processor_config(checkpoint: Path) -> dict[str, Any]:
    """The ``image_processor`` part of the checkpoint's ``processor_config.json`` (or its
    ``preprocessor_config.json``)."""
    path = checkpoint / "processor_config.json"
    if path.exists():
        return json.loads(path.read_text())["image_processor"]
    return json.loads((checkpoint / "preprocessor_config.json").read_text())


def pixel_budget(processor: dict[str, Any]) -> tuple[int, int]:
    """(min_pixels, max_pixels) of a Qwen2-VL-style image processor config."""
    size = processor.get("size") or {}
    low = size.get("shortest_edge", processor.get("min_pixels"))
    high = size.get("longest_edge", processor.get("max_pixels"))
    return int(low), int(high)


def image_tokens(width: int, height: int, processor: dict[str, Any]) -> int:
    """Image tokens of a ``width`` x ``height`` image after the processor's resize (transformers'
    ``smart_resize``: both sides multiples of patch x merge, pixels within the budget), merged
    ``merge_size`` x ``merge_size``."""
    from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

    use_pil_image_processors()  # transformers' Qwen2-VL module imports torchvision otherwise
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    patch, merge = int(processor["patch_size"]), int(processor["merge_size"])
    low, high = pixel_budget(processor)
    h, w = smart_resize(height, width, factor=patch * merge, min_pixels=low, max_pixels=high)
    return (h // patch) * (w // patch) // (merge * merge)


@cache
def model_config(checkpoint: Path) -> dict[str, Any]:
    return json.loads((checkpoint / "config.json").read_text())


@cache
def projection_dim(checkpoint: Path) -> int | None:
    """Output width of the checkpoint's projection (``custom_text_proj.weight`` rows), read
    from the safetensors header; None for a model without one (its vectors are hidden
    states)."""
    for path in sorted(checkpoint.glob("*.safetensors")):
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        for name, entry in header.items():
            if name.endswith("custom_text_proj.weight"):
                return int(entry["shape"][0])
    return None


def vector_dim(checkpoint: Path) -> int:
    """Width of the token vectors: the projection's, else the language model's hidden size."""
    return projection_dim(checkpoint) or int(model_config(checkpoint)["text_config"]["hidden_size"])


# -- requests -----------------------------------------------------------------------------------


def native_chat_template(image_prompt: str, placeholder: str) -> str:
    """A Jinja chat template that renders ``image_prompt`` exactly for one user message holding
    one image: ``placeholder`` (the model's image placeholder text inside ``image_prompt``) is
    written where the message's image is, the rest verbatim (OpenAI content format)."""
    before, found, after = image_prompt.partition(placeholder)
    if not found or "{" in image_prompt:
        raise ValueError(f"image prompt {image_prompt!r} must hold {placeholder!r} and no braces")
    # No whitespace control ("{%-"): it would also strip the prompt's own newlines. Jinja drops
    # a template's final newline (transformers renders chat templates so), so the prompt's
    # trailing newlines are written by an expression.
    image = "{% if part.type in ('image', 'image_url') %}" + placeholder + "{% endif %}"
    loop = "{% for part in messages[0].content %}" + image + "{% endfor %}"
    text = after.rstrip("\n")
    newlines = len(after) - len(text)
    return before + loop + text + ("{{ '" + "\\n" * newlines + "' }}" if newlines else "")


def plugin_page_body(model: str, path: str, encoding: str) -> dict:
    data: dict[str, Any] = {"image": image_b64(path)}
    if encoding != "float":
        data.update(encoding_fields(encoding))
    return {"model": model, "data": data}


def plugin_query_body(model: str, text: str, encoding: str) -> dict:
    data: dict[str, Any] = {"text": text, "is_query": True}
    if encoding != "float":
        data.update(encoding_fields(encoding))
    return {"model": model, "data": data}


def native_page_body(model: str, path: str, encoding: str) -> dict:
    url = "data:image/png;base64," + image_b64(path)
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
    return {"model": model, "messages": [message], "task": "token_embed",
            **encoding_fields(encoding)}  # fmt: skip


def native_query_body(suffix: str, prefix: str = "") -> Callable[[str, str, str], dict]:
    def body(model: str, text: str, encoding: str) -> dict:
        return {"model": model, "input": prefix + text + suffix, "task": "token_embed",
                **encoding_fields(encoding)}  # fmt: skip

    return body


def plugin_vectors(answer: dict) -> list[Any]:
    """The token-vector matrices (numpy float32) of a plugin answer (any of its forms)."""
    from vllm_factory.heads.colbert.vectors import decode_response

    return decode_response(answer["data"])


def native_vectors(answer: dict, dim: int, embed_dtype: str = "float32") -> list[Any]:
    """The token-vector matrices (numpy float32) of a native ``token_embed`` answer (base64:
    ``embed_dtype`` numbers in the server's byte order, little-endian on x86 and ARM hosts)."""
    import numpy as np
    from vllm_factory.heads.colbert.vectors import decode_vectors

    out = []
    for item in answer["data"]:
        if isinstance(item["data"], str):
            packed = {"embeddings": item["data"], "num_tokens": -1, "dim": dim}
            out.append(decode_vectors({**packed, "dtype": embed_dtype}))
        else:
            out.append(np.asarray(item["data"], dtype=np.float32))
    return out


def check_plugin(answer: dict) -> None:
    vectors = plugin_vectors(answer)[0]
    if vectors.ndim != 2 or not len(vectors) or vectors.shape[1] < 2:
        raise ValueError(f"plugin: expected one vector per token, got {str(answer)[:300]}")


def compare(native: Sequence[Any], plugin: Sequence[Any]) -> dict[str, Any]:
    """Native's token vectors against the plugin's, request by request."""
    import numpy as np

    shapes_equal = len(native) == len(plugin) and all(
        a.shape == b.shape for a, b in zip(native, plugin, strict=True)
    )
    if not shapes_equal:
        counts = [(len(a), len(b)) for a, b in zip(native, plugin, strict=False)]
        return {"matches_plugin": False, "token_counts_native_vs_plugin": counts[:8]}
    diff = max(float(np.abs(a - b).max()) for a, b in zip(native, plugin, strict=True))
    cosine = min(
        float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())
        for a, b in zip(native, plugin, strict=True)
    )
    return {
        "matches_plugin": cosine >= MATCH_COSINE,
        "max_abs_diff_vs_plugin": float(f"{diff:.3g}"),
        "min_cosine_vs_plugin": round(cosine, 6),
    }


# -- FLOPs --------------------------------------------------------------------------------------


def qwen3_vl_flops(
    config: dict[str, Any], dim: int, tokens: int, image_tokens: int = 0
) -> dict[str, float]:
    """Matmul FLOPs (2 per multiply-add) of one ColQwen3-style forward pass over ``tokens``
    tokens of which ``image_tokens`` come from one image: ``{"vision", "language",
    "projection", "total"}``.

    Vision tower over p = ``image_tokens * merge^2`` patches of width v (MLP i_v, depth D_v):
    patch embedding ``2 p (3 t s^2) v`` (t temporal patch, s patch size), per block QKV
    ``6 p v^2`` + output ``2 p v^2`` + MLP ``4 p v i_v`` + attention ``4 p^2 v`` (every patch
    sees the whole image), then the merger and each deepstack merger per image token
    ``2 (4v)^2 + 2 (4v) h`` (for merge 2). Language model of width h over n tokens (q heads and
    k KV heads of size d, gated MLP i, L layers): per layer ``2 n h (q + 2k) d`` + ``2 n q d h``
    + ``6 n h i`` + causal attention ``4 q d n (n + 1) / 2``. Projection ``2 n h dim``.
    Embeddings (look-ups), norms, activations, softmax and rotary embeddings are left out.
    """
    text, vision = config["text_config"], config["vision_config"]
    h, i, layers = text["hidden_size"], text["intermediate_size"], text["num_hidden_layers"]
    q, k = text["num_attention_heads"], text["num_key_value_heads"]
    d = text.get("head_dim") or h // q
    n = tokens
    per_layer = 2 * n * h * (q + 2 * k) * d + 2 * n * q * d * h + 6 * n * h * i
    language = layers * (per_layer + 4 * q * d * n * (n + 1) / 2)
    vision_flops = 0.0
    if image_tokens:
        v, iv, depth = vision["hidden_size"], vision["intermediate_size"], vision["depth"]
        merge = vision["spatial_merge_size"]
        p = image_tokens * merge * merge
        pixels = 3 * vision["temporal_patch_size"] * vision["patch_size"] ** 2
        merged = v * merge * merge
        mergers = 1 + len(vision.get("deepstack_visual_indexes") or [])
        vision_flops = (
            2 * p * pixels * v
            + depth * (8 * p * v * v + 4 * p * v * iv + 4 * p * p * v)
            + mergers * image_tokens * (2 * merged * merged + 2 * merged * h)
        )
    projection = 2 * n * h * dim
    total = vision_flops + language + projection
    return {"vision": float(vision_flops), "language": float(language),
            "projection": float(projection), "total": float(total)}  # fmt: skip


# -- the spec -----------------------------------------------------------------------------------


class ColPaliBenchSpec(PluginSpec):
    """The spec of the ColPali package whose ``benchmarks/bench_spec.py`` is ``spec_file``.

    ``image_prompt``, ``query_prefix``, ``query_suffix``: the reference processor's prompts (as
    the package's IOProcessor states them); ``image_placeholder``: the model's image placeholder
    text inside ``image_prompt``; ``native_architecture``: vLLM's own model for the checkpoint,
    ``native_matches``: whether it computes the reference's vectors (False: it is timed on the
    same inputs, and its distance from the plugin's vectors is recorded, not expected small);
    ``flops``: ``(config, dim, tokens, image_tokens) -> {"total", ...}``;
    ``reference_library``: the reference's name in reports, ``reference_dists``: distributions
    of the reference venv whose versions the report records besides colpali-engine's, torch's
    and transformers'. A package whose processor is not Qwen2-VL-style (its image tokens, its
    image budget) overrides :meth:`image_tokens_of` and :meth:`longest_image_tokens`."""

    workloads = WORKLOADS

    def __init__(
        self,
        spec_file: str | Path,
        *,
        image_prompt: str,
        image_placeholder: str,
        query_suffix: str = "",
        query_prefix: str = "",
        native_architecture: str | None = None,
        native_matches: bool = True,
        flops: Callable[[dict, int, int, int], dict[str, float]] | None = None,
        reference_library: str = "colpali-engine",
        reference_dists: Sequence[str] = (),
    ) -> None:
        self.package = Path(spec_file).resolve().parents[1]
        self.name = self.package.name
        self.reference = package_reference(self.package)
        module = importlib.import_module(f"vllm_factory.models.{self.name}")
        self.io_processor, self.architecture = module.IO_PROCESSOR, module.ARCHITECTURE
        self.image_prompt, self.image_placeholder = image_prompt, image_placeholder
        self.query_prefix, self.query_suffix = query_prefix, query_suffix
        self.native_architecture, self.native_matches = native_architecture, native_matches
        self.flops, self.reference_library = flops, reference_library
        self.reference_dists = list(reference_dists)
        self.workload = WORKLOADS[0]
        self.corpus_tokens: list[int] = []
        self.plugin_seen: list[Any] = []

    # -- inputs ------------------------------------------------------------------------------

    def word_texts(self) -> list[str]:
        corpus = json.loads(self.reference.CORPUS.read_text(encoding="utf-8"))
        return [item["text"] for part in ("queries", "documents") for item in corpus[part]]

    def bench_root(self) -> Path:
        return bench_artifacts(self.name)

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        if config.checkpoint:
            return Path(config.checkpoint)
        size = SIZE_FOR_DEVICE[config.device]
        env = GivenPython(config.ref_python) if config.ref_python else None

        def build(target: Path) -> None:
            self.reference.build_checkpoint(target / "checkpoint", size=size, seed=SEED, env=env)

        inputs = [self.reference.builder, self.reference.CORPUS, *KIT_INPUTS,
                  *self.reference.inputs]  # fmt: skip
        name = f"checkpoint-{size}-seed{SEED}"
        return cached_artifact(name, inputs, build, root=self.bench_root()) / "checkpoint"

    @cache  # noqa: B019 - one spec per process, a handful of checkpoints
    def _tokenizer(self, checkpoint: Path) -> Any:
        from transformers import AutoTokenizer

        # Never the checkpoint's remote code (a config may name some: Nemotron's auto_map).
        return AutoTokenizer.from_pretrained(str(checkpoint), trust_remote_code=False)

    def vector_dim(self, checkpoint: Path) -> int:
        """Width of the served vectors (:func:`vector_dim`; a package whose projection is saved
        elsewhere overrides it)."""
        return vector_dim(checkpoint)

    def prompt_tokens(self, checkpoint: Path) -> int:
        """Tokens of the image prompt besides the image's own (its one placeholder token
        becomes the image tokens)."""
        ids = self._tokenizer(checkpoint)(self.image_prompt, add_special_tokens=False)
        return len(ids["input_ids"]) - 1

    def image_tokens_of(self, checkpoint: Path, width: int, height: int) -> int:
        """Tokens that a ``width`` x ``height`` image becomes (Qwen2-VL-style processors)."""
        return image_tokens(width, height, image_processor_config(checkpoint))

    def longest_image_tokens(self, checkpoint: Path) -> int:
        """The most tokens one image can become (Qwen2-VL-style processors: the pixel budget
        over a merged token's pixels)."""
        processor = image_processor_config(checkpoint)
        tile = int(processor["patch_size"]) * int(processor["merge_size"])
        return pixel_budget(processor)[1] // (tile * tile)

    def page_tokens(self, checkpoint: Path, size: Sequence[int]) -> int:
        """Model input tokens of a page of ``size`` (width, height): prompt and image tokens."""
        return self.prompt_tokens(checkpoint) + self.image_tokens_of(checkpoint, *size)

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        tokenizer = self._tokenizer(checkpoint)

        @cache
        def count(text: str) -> int:  # process_queries: prefix + text + augmentation
            return len(tokenizer(self.query_prefix + text + self.query_suffix)["input_ids"])

        return count

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        longest = self.prompt_tokens(checkpoint) + self.longest_image_tokens(checkpoint)
        return -(-max(longest, max_tokens + 64) // 256) * 256

    def corpus(self, config: BenchConfig, checkpoint: Path) -> Corpus:
        self.workload = config.workload or WORKLOADS[0]
        self._prompt = self.prompt_tokens(checkpoint)
        pool = word_pool(self.word_texts())
        if self.workload == "queries":
            # Lengths of the query text itself (8 - 32 tokens); counted with its prompt.
            tokenizer = self._tokenizer(checkpoint)

            def count(text: str) -> int:
                return len(tokenizer(text)["input_ids"])

            corpus = build_corpus(QUERY_LENGTHS, config.corpus_size, config.seed, pool, count)
            frame = self.token_counter(checkpoint)  # the whole prompt, as the server sees it
            corpus.tokens = [frame(text) for text in corpus.texts]
            corpus.buckets = ["query"] * len(corpus.texts)
        else:
            paths = self.pages(config.corpus_size, config.seed, pool)
            index = json.loads((paths[0].parent / "pages.json").read_text())
            sizes = [entry["size"] for entry in index]
            tokens = [self.page_tokens(checkpoint, size) for size in sizes]
            buckets = [f"page {w}x{h}" for w, h in sizes]
            corpus = Corpus([str(p) for p in paths], tokens, buckets)
        self.corpus_tokens = list(corpus.tokens)
        return corpus

    def pages(self, count: int, seed: int, words: Sequence[str]) -> list[Path]:
        """The cached page set (``.artifacts/<package>-bench/pages-seed<S>-n<N>-<hash>/``)."""

        def build(target: Path) -> None:
            write_pages(target, count, seed, words)

        inputs = [Path(__file__), self.reference.CORPUS]
        folder = cached_artifact(f"pages-seed{seed}-n{count}", inputs, build, self.bench_root())
        return [folder / f"{i:04d}.png" for i in range(count)]

    # -- reference ---------------------------------------------------------------------------

    def reference_python(self, config: BenchConfig) -> Path:
        if config.ref_python:
            return Path(config.ref_python)
        return self.reference.env().ensure().python

    def reference_environment(self) -> dict[str, str]:
        return {"PYTHONPATH": self.reference.pythonpath()}

    def baseline_args(self) -> list[str]:
        inputs = "queries" if self.workload == "queries" else "images"
        return [
            "--library", "colpali-engine", "--inputs", inputs,
            "--model-class", self.reference.model_class,
            "--processor-class", self.reference.processor_class,
            *(["--versions-of", ",".join(self.reference_dists)] if self.reference_dists else []),
        ]  # fmt: skip

    # -- servers -----------------------------------------------------------------------------

    def native_template(self) -> Path:
        path = self.bench_root() / f"{self.name}-image-prompt.jinja"
        text = native_chat_template(self.image_prompt, self.image_placeholder)
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return path

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        pages = self.workload != "queries"
        extra = SERVER_ARGS if pages else ()
        dim, projection = self.vector_dim(checkpoint), projection_dim(checkpoint)
        out = [
            ServerSpec(
                name="plugin",
                label=f"plugin {self.io_processor}",
                io_processor_plugin=None,
                hf_overrides=None,
                make_body=plugin_page_body if pages else plugin_query_body,
                check=check_plugin,
                extra_args=("--config-format", "colpali", *extra),
                describe=self.describe_plugin,
            )
        ]
        if self.native_architecture:
            template = ("--chat-template", str(self.native_template()), *NATIVE_ARGS)
            query_body = native_query_body(self.query_suffix, self.query_prefix)
            label = f"vLLM native {self.native_architecture}"
            out.append(
                ServerSpec(
                    name="native",
                    label=label if self.native_matches else f"{label} (other vectors)",
                    io_processor_plugin=None,
                    # vLLM builds a projection only with ``dim`` set (see the module docstring).
                    hf_overrides={"dim": projection} if projection else None,
                    make_body=native_page_body if pages else query_body,
                    check=check_native,
                    extra_args=(*(template if pages else ()), *extra),
                    describe=functools.partial(self.describe_native, dim=dim),
                )
            )
        return out

    def _token_figures(self, counts: list[int]) -> dict[str, Any]:
        figures: dict[str, Any] = {
            "requests": len(counts),
            "tokens_mean": round(sum(counts) / max(len(counts), 1), 1),
            "tokens_equal_corpus": counts == self.corpus_tokens[: len(counts)],
        }
        if self.workload != "queries" and self._prompt is not None:
            images = [c - self._prompt for c in counts]
            figures["image_tokens_mean"] = round(sum(images) / max(len(images), 1), 1)
            figures["image_tokens_min_max"] = [min(images), max(images)]
        return figures

    _prompt: int | None = None

    def describe_plugin(self, bodies: list[dict], answers: list[dict]) -> dict[str, Any]:
        """Tokens (and image tokens) per request of the plugin's answers; keeps its vectors for
        native's comparison."""
        self.plugin_seen = [plugin_vectors(answer)[0] for answer in answers]
        return self._token_figures([len(v) for v in self.plugin_seen])

    def describe_native(self, bodies: list[dict], answers: list[dict], dim: int) -> dict:
        """Tokens per request of native's answers and their difference from the plugin's."""
        vectors = [
            native_vectors(answer, dim, body.get("embed_dtype", "float32"))[0]
            for body, answer in zip(bodies, answers, strict=True)
        ]
        figures = self._token_figures([len(v) for v in vectors])
        if self.plugin_seen:
            figures.update(compare(vectors, self.plugin_seen))
            figures["expected_to_match"] = self.native_matches
            if self.native_matches and not figures["matches_plugin"]:
                logger.warning("native's vectors differ from the plugin's: %s", figures)
        return figures

    # -- report ------------------------------------------------------------------------------

    def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float | None:
        if self.flops is None:
            return None
        images = 0
        if self.workload != "queries":
            images = tokens - self.prompt_tokens(checkpoint)
        return self.flops(model_config(checkpoint), self.vector_dim(checkpoint), tokens, images)[
            "total"
        ]

    def shape_notes(self, checkpoint: Path) -> dict[str, Any]:
        """The towers' shapes and the image budget (Qwen3-VL's keys)."""
        config, processor = model_config(checkpoint), image_processor_config(checkpoint)
        return {
            "text_config": {k: config["text_config"].get(k) for k in (
                "hidden_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "intermediate_size")},
            "vision_config": {k: config["vision_config"].get(k) for k in (
                "depth", "hidden_size", "num_heads", "intermediate_size", "patch_size",
                "spatial_merge_size", "deepstack_visual_indexes")},
            "image_pixels_min_max": list(pixel_budget(processor)),
        }  # fmt: skip

    def checkpoint_notes(self, checkpoint: Path) -> dict[str, Any]:
        """Shapes, the image budget and the FLOPs per request (mean over the corpus)."""
        notes: dict[str, Any] = {
            "workload": self.workload,
            **self.shape_notes(checkpoint),
            "projection_dim": projection_dim(checkpoint),
            "vector_dim": self.vector_dim(checkpoint),
            "image_prompt_tokens_besides_image": self.prompt_tokens(checkpoint),
            "weights": "random (timings only: ColPali runs one forward pass per input, whatever "
                       "the weights)",
        }  # fmt: skip
        if self.flops is not None and self.corpus_tokens:
            config, dim, prompt = (
                model_config(checkpoint),
                self.vector_dim(checkpoint),
                self._prompt,
            )
            totals: dict[str, float] = {}
            for tokens in self.corpus_tokens:
                images = tokens - (prompt or 0) if self.workload != "queries" else 0
                for key, value in self.flops(config, dim, tokens, images).items():
                    totals[key] = totals.get(key, 0.0) + value
            count = len(self.corpus_tokens)
            notes["gflops_per_request_mean"] = {k: round(v / count / 1e9, 2)
                                                for k, v in totals.items()}  # fmt: skip
        return notes
