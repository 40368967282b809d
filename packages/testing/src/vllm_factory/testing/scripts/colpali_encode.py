"""Encode the parity corpus (text queries, text documents, images) with colpali-engine.

    python colpali_encode.py --model-class colpali_engine.models:ColQwen3 \
        --processor-class colpali_engine.models:ColQwen3Processor --checkpoint DIR \
        --corpus corpus.json --images DIR --out FILE.npz [--dtype float32|bfloat16] \
        [--bf16-out FILE.npz]

Runs in the ColPali reference venv (the ColPali family kit does, for every ColPali package).
One item at a time, so no batch padding reaches the model: each query through
``processor.process_queries([q])`` (the library's query augmentation suffix included), each text
document through ``processor.process_texts([t])``, each image (``--images``: the folder
``colpali_images.py`` wrote) through ``processor.process_images([img])``; then ``model(**batch)``.
CPU; fp32, or the library's own bf16 run (``--dtype bfloat16``: the model in bf16, vectors
written as float32; ``--bf16-out``: that run too, from the same process). The .npz needs no
pickle; per item ``i`` of each part P in {query, text, image} (rows where the attention mask is
1, in order):

  P_i         f32  [n, dim]   the model's L2-normalised token vectors
  P_ids_i     i64  [n]        input_ids fed to the model
  image_grid_i i64 [3]        image_grid_thw of image i (temporal, height, width in patches),
                              where the processor gives one (Qwen-VL)
  meta_json   <U   scalar     json: versions, dtype, item ids, token counts, image sizes ...

Also importable (``refenv.ReferenceEnv.run`` puts this folder on ``PYTHONPATH``): the family's
checkpoint builders use :func:`load_class` and :func:`check_not_degenerate`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

use_pil_image_processors()  # before transformers' Qwen2-VL / colpali-engine's modules load

import numpy as np
import torch
from PIL import Image

LOG = logging.getLogger("colpali_encode")
PARTS = ("query", "text", "image")
# Mean off-diagonal cosine of one item's vectors above this: a degenerate (collapsed) model.
# Checked on every image and on the longest query and text document.
DEGENERATE = 0.9
# Versions recorded in the meta: the stack, and whichever reference libraries are installed.
LIBRARIES = ("torch", "transformers", "tokenizers", "pillow", "colpali-engine",
             "sauerkrautlm-colpali")  # fmt: skip


def installed_versions(names: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def load_class(spec: str) -> Any:
    """``"package.module:Name"`` -> the object."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def mean_offdiag_cosine(vecs: np.ndarray) -> float:
    """Mean cosine between distinct rows of ``vecs`` [n, dim] (rows need not be normalised)."""
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True).clip(min=1e-12)
    sims = unit @ unit.T
    n = len(unit)
    return float((sims.sum() - np.trace(sims)) / max(n * n - n, 1))


def check_not_degenerate(vecs: np.ndarray, what: str) -> float:
    """Raise when the token vectors of one item are (nearly) all the same direction."""
    mean = mean_offdiag_cosine(vecs)
    if len(vecs) < 2 or mean > DEGENERATE:
        raise RuntimeError(f"degenerate token vectors in {what} (mean off-diagonal cosine "
                           f"{mean:.3f} over {len(vecs)} vectors)")  # fmt: skip
    return mean


def encode_one(model: Any, batch: Any) -> tuple[np.ndarray, np.ndarray]:
    """Vectors and input ids of the one item in ``batch``, where its attention mask is 1."""
    out = model(**batch)
    mask = batch["attention_mask"][0].bool()
    vecs = out[0][mask].float().numpy()
    ids = batch["input_ids"][0][mask].numpy().astype(np.int64)
    assert len(vecs) == len(ids) and np.isfinite(vecs).all()
    return vecs.astype(np.float32), ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-class", required=True, help="module:Class, e.g. "
                    "colpali_engine.models:ColQwen3")  # fmt: skip
    ap.add_argument("--processor-class", required=True)
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--images", required=True, type=Path, help="colpali_images.py's folder")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--bf16-out", type=Path, help="also the library's bf16 run, into this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    encode_corpus(args, args.dtype, args.out)
    if args.bf16_out is not None:  # from the same process: importing costs more than encoding
        encode_corpus(args, "bfloat16", args.bf16_out)


def encode_corpus(args: argparse.Namespace, dtype_name: str, out: Path) -> None:
    """Every query, text and image of the corpus with the model in ``dtype_name``, into
    ``out`` (as a fresh process does it: seeded, the model and processor loaded anew)."""
    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)

    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    index = json.loads((args.images / "images.json").read_text(encoding="utf-8"))
    assert [e["id"] for e in index] == [x["id"] for x in corpus["images"]], "images.json is stale"
    model_cls, processor_cls = load_class(args.model_class), load_class(args.processor_class)
    model = model_cls.from_pretrained(args.checkpoint, dtype=dtype).eval()
    processor = processor_cls.from_pretrained(args.checkpoint)

    arrays: dict[str, np.ndarray] = {}
    counts: dict[str, list[int]] = {p: [] for p in PARTS}
    mean_cos: dict[str, float] = {}
    with torch.inference_mode():
        for part, items in (("query", corpus["queries"]), ("text", corpus["documents"])):
            process = processor.process_queries if part == "query" else processor.process_texts
            for i, item in enumerate(items):
                vecs, ids = encode_one(model, process([item["text"]]))
                arrays[f"{part}_{i}"], arrays[f"{part}_ids_{i}"] = vecs, ids
                counts[part].append(len(ids))
                mean_cos[item["id"]] = mean_offdiag_cosine(vecs)
        for i, entry in enumerate(index):
            with Image.open(args.images / entry["file"]) as img:
                img.load()
                batch = processor.process_images([img])
            vecs, ids = encode_one(model, batch)
            arrays[f"image_{i}"], arrays[f"image_ids_{i}"] = vecs, ids
            if "image_grid_thw" in batch:
                arrays[f"image_grid_{i}"] = batch["image_grid_thw"][0].numpy().astype(np.int64)
            counts["image"].append(len(ids))
            mean_cos[entry["id"]] = check_not_degenerate(vecs, f"image {entry['id']}")

    image_token_id = processor.image_token_id
    meta = {
        "model_class": args.model_class,
        "processor_class": args.processor_class,
        "dtype": dtype_name,
        "device": "cpu",
        "normalized": True,
        "versions": installed_versions(LIBRARIES),
        "ids": {"query": [x["id"] for x in corpus["queries"]],
                "text": [x["id"] for x in corpus["documents"]],
                "image": [e["id"] for e in index]},
        "token_counts": counts,
        "image_tokens": [int((arrays[f"image_ids_{i}"] == image_token_id).sum())
                         for i in range(len(index))],
        "image_sizes": [e["size"] for e in index],
        "image_modes": [e["mode"] for e in index],
        "image_token_id": image_token_id,
        "visual_prompt_prefix": processor.visual_prompt_prefix,
        "query_prefix": processor.query_prefix,
        "query_augmentation_token": processor.query_augmentation_token,
        "padding_side": processor.tokenizer.padding_side,
        "dim": int(arrays["query_0"].shape[1]),
        "mean_offdiag_cosine": mean_cos,
    }  # fmt: skip
    # Every image is checked above; of the texts the longest query and document (a short query
    # is mostly its identical augmentation tokens, a one-token document has no pair at all).
    for part, n in (("query", len(corpus["queries"])), ("text", len(corpus["documents"]))):
        longest = counts[part].index(max(counts[part]))
        check_not_degenerate(arrays[f"{part}_{longest}"], f"the longest {part} ({n} items)")
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, meta_json=np.array(json.dumps(meta)), **arrays)
    LOG.info("wrote %s (%s): token counts %s; mean cosine in one item %.3f..%.3f",
             out, dtype_name, counts, min(mean_cos.values()), max(mean_cos.values()))  # fmt: skip


if __name__ == "__main__":
    main()
