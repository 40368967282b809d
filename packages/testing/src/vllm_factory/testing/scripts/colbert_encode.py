"""Encode the parity corpus with a reference library and write token vectors to an .npz file.

    python colbert_encode.py --library pylate|st --checkpoint DIR --corpus corpus.json \
        --out FILE.npz [--batch-size 4] [--dtype bfloat16] [--full-batches] [--bf16-out FILE.npz]

Run `--library pylate` in the PyLate venv and `--library st` in the sentence-transformers venv
(the ColBERT family kit does, for every ColBERT package). fp32 (or the library's own bf16 run
with ``--dtype bfloat16``: vectors and offsets only), CPU; ``--bf16-out`` writes that bf16 run
too, from the same process (importing the libraries costs more than encoding). ``--full-batches``: every batch must
hold more than one text (transformers' LFM2 zeroes the short-convolution input of padding
positions, so a query's expansion tokens, only when the batch has more than one row); the
corpus sizes must then be multiples of the batch size. ``meta_json`` records how far a batch of
one moves the PyLate query vectors. The .npz needs no pickle; its layout (per part P in
{query, document}):

  P_ids            <U   [n]        item ids from the corpus
  P_offsets        i64  [n+1]      item i owns rows P_offsets[i]:P_offsets[i+1] of P_vectors
  P_vectors        f32  [T, dim]   the library's default output: kept, L2-normalised token vectors
  P_tok_offsets    i64  [n+1]      item i owns P_tok_offsets[i]:P_tok_offsets[i+1] of the next 3
  P_input_ids      i64  [S]        exact ids fed to the transformer (batch padding stripped for
                                   documents; queries keep their full expanded length)
  P_attention_mask i64  [S]        attention mask fed to the transformer for those positions
  P_kept           bool [S]        which of those positions survive into P_vectors (in order)
  meta_json        <U   scalar     json: library versions, lengths, prefix/mask/skiplist ids ...
"""

from __future__ import annotations

import argparse
import json
import logging
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import torch

LOG = logging.getLogger("colbert_encode")
PARTS = ("query", "document")


def pack(
    ids: list[str], vectors: list[np.ndarray], tokens: list[dict[str, np.ndarray]], part: str
) -> dict[str, np.ndarray]:
    """Flatten ragged per-item arrays into concatenated arrays plus offsets."""
    out: dict[str, np.ndarray] = {f"{part}_ids": np.array(ids)}
    out[f"{part}_offsets"] = np.cumsum([0] + [len(v) for v in vectors]).astype(np.int64)
    out[f"{part}_vectors"] = np.concatenate(vectors).astype(np.float32)
    out[f"{part}_tok_offsets"] = np.cumsum([0] + [len(t["input_ids"]) for t in tokens])
    for key, dtype in (("input_ids", np.int64), ("attention_mask", np.int64), ("kept", bool)):
        out[f"{part}_{key}"] = np.concatenate([t[key] for t in tokens]).astype(dtype)
    return out


def encode_pylate(
    ckpt: str, texts: dict[str, list[str]], bs: int, full_batches: bool = False
) -> tuple[dict, dict]:
    """PyLate 1.6: default encode() output plus the raw per-position view (output_value=None)."""
    from pylate import models

    model = models.ColBERT(model_name_or_path=ckpt, device="cpu")
    result: dict[str, Any] = {}
    for part in PARTS:
        is_query = part == "query"
        kw = {
            "is_query": is_query,
            "batch_size": bs,
            "convert_to_numpy": True,
            "show_progress_bar": False,
        }
        vecs = model.encode(texts[part], **kw)
        raw = model.encode(texts[part], output_value=None, **kw)
        tokens = []
        for i, v in enumerate(vecs):
            am = np.asarray(raw["attention_mask"][i])
            kept = np.asarray(raw["masks"][i]).astype(bool)
            ids = np.asarray(raw["input_ids"][i])
            # Documents are padded to the longest in their batch (mask 0): strip that padding. Queries are always query_length long: keep every position.
            n = len(ids) if is_query else int(am.sum())
            assert kept[:n].sum() == len(v) and not kept[n:].any()
            emb = np.asarray(raw["token_embeddings"][i])[:n][kept[:n]]
            assert np.allclose(emb, v, atol=1e-6), "raw view disagrees with default output"
            tokens.append({"input_ids": ids[:n], "attention_mask": am[:n], "kept": kept[:n]})
        result[part] = (list(vecs), tokens)
    if full_batches:
        assert all(len(texts[p]) % bs == 0 for p in PARTS), "a batch of one: see the docstring"
    alone = model.encode(texts["query"], is_query=True, batch_size=1, convert_to_numpy=True)
    bs1_diff = max(float(np.abs(a - b).max()) for a, b in zip(alone, result["query"][0]))
    tok = model.tokenizer
    meta = {
        "query_length": model.query_length,
        "document_length": model.document_length,
        "query_prefix": model.query_prefix,
        "document_prefix": model.document_prefix,
        "query_prefix_id": model.query_prefix_id,
        "document_prefix_id": model.document_prefix_id,
        "do_query_expansion": model.do_query_expansion,
        "attend_to_expansion_tokens": model.attend_to_expansion_tokens,
        "skiplist_words": model.skiplist_words,
        "skiplist_ids": [int(x) for x in model.skiplist],
        "padding_side": model.tokenizer.padding_side,
        "query_batch_of_one_max_abs_diff": bs1_diff,
    }
    return result, meta | special_ids(tok)


def encode_st(ckpt: str, texts: dict[str, list[str]], bs: int) -> tuple[dict, dict]:
    """sentence-transformers MultiVectorEncoder: encode_query / encode_document."""
    from sentence_transformers import MultiVectorEncoder

    model = MultiVectorEncoder(ckpt, device="cpu")
    # ST calls the backbone's forward() directly (no __call__, so no hooks): wrap it to record
    # exactly what the transformer receives.
    fed: list[dict[str, torch.Tensor]] = []
    backbone = model[0].model
    original_forward = backbone.forward

    def recording_forward(*a: Any, **kw: Any) -> Any:
        fed.append({k: kw[k].clone() for k in ("input_ids", "attention_mask")})
        return original_forward(*a, **kw)

    backbone.forward = recording_forward
    result: dict[str, Any] = {}
    for part in PARTS:
        fn = model.encode_query if part == "query" else model.encode_document
        vecs = fn(texts[part], batch_size=bs, convert_to_numpy=True, show_progress_bar=False)
        tokens = []
        for text, v in zip(texts[part], vecs, strict=True):
            # One item at a time (no batch padding): ids and mask fed to the transformer, and
            # the scoring mask (output "attention_mask" of the raw view) = surviving positions.
            fed.clear()
            raw = fn([text], output_value=None)[0]
            ids, am = fed[0]["input_ids"][0].numpy(), fed[0]["attention_mask"][0].numpy()
            kept = raw["attention_mask"].numpy().astype(bool)
            assert len(kept) == len(ids) and kept.sum() == len(v), (part, text)
            tokens.append({"input_ids": ids, "attention_mask": am, "kept": kept})
        result[part] = ([np.asarray(v) for v in vecs], tokens)
    backbone.forward = original_forward
    meta = {
        "modules": [type(m).__name__ for m in model],
        "prompts": model.prompts,
        "transformer": {
            k: getattr(model[0], k, None)
            for k in ("query_length", "document_length", "query_expansion", "max_seq_length")
        },
    }
    return result, meta | special_ids(model.tokenizer)


def special_ids(tok: Any) -> dict[str, Any]:
    """Ids of the tokenizer's special tokens as seen by the library after loading."""
    return {
        f"{k}_token_id": getattr(tok, f"{k}_token_id", None)
        for k in ("bos", "eos", "cls", "sep", "pad", "mask", "unk")
    }


def encode_bf16(
    ckpt: str, texts: dict[str, list[str]], bs: int, library: str
) -> dict[str, np.ndarray]:
    """The library's own default output with the model in bf16 (on the CPU): what bf16 costs the
    library itself, against which a bf16 server is judged. Vectors and offsets only."""
    kwargs = {"device": "cpu", "model_kwargs": {"torch_dtype": torch.bfloat16}}
    if library == "pylate":
        from pylate import models

        model = models.ColBERT(ckpt, **kwargs)
        encoders = {p: partial(model.encode, is_query=p == "query") for p in PARTS}
    else:
        from sentence_transformers import MultiVectorEncoder

        model = MultiVectorEncoder(ckpt, **kwargs)
        encoders = {"query": model.encode_query, "document": model.encode_document}
    arrays: dict[str, np.ndarray] = {}
    for part in PARTS:
        vecs = encoders[part](
            texts[part], batch_size=bs, convert_to_numpy=False, show_progress_bar=False
        )
        vecs = [v.float().numpy() for v in vecs]
        arrays[f"{part}_offsets"] = np.cumsum([0] + [len(v) for v in vecs]).astype(np.int64)
        arrays[f"{part}_vectors"] = np.concatenate(vecs).astype(np.float32)
    return arrays


def write_bf16(out: Path, ckpt: str, texts: dict[str, list[str]], bs: int, library: str) -> None:
    """:func:`encode_bf16` into ``out`` with the library versions."""
    with torch.inference_mode():
        arrays = encode_bf16(ckpt, texts, bs, library)
    name = "pylate" if library == "pylate" else "sentence-transformers"
    meta = {"library": library, "dtype": "bfloat16", "device": "cpu", "versions": {
        lib: version(lib) for lib in ("torch", "transformers", name)}}  # fmt: skip
    np.savez(out, meta_json=np.array(json.dumps(meta)), **arrays)
    LOG.info("wrote %s (bf16)", out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", choices=("pylate", "st"), required=True)
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--full-batches", action="store_true", help="no batch of one (see above)")
    ap.add_argument("--bf16-out", type=Path, help="also the library's bf16 run, into this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.manual_seed(0)

    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    items = {"query": corpus["queries"], "document": corpus["documents"]}
    texts = {p: [x["text"] for x in items[p]] for p in PARTS}
    if args.dtype == "bfloat16":
        write_bf16(args.out, str(args.checkpoint), texts, args.batch_size, args.library)
        return
    with torch.inference_mode():
        if args.library == "pylate":
            result, meta = encode_pylate(
                str(args.checkpoint), texts, args.batch_size, args.full_batches
            )
        else:
            result, meta = encode_st(str(args.checkpoint), texts, args.batch_size)

    libs = ["torch", "transformers", "tokenizers", "sentence-transformers"]
    libs += ["pylate"] if args.library == "pylate" else []
    meta = {
        "library": args.library,
        "batch_size": args.batch_size,
        "versions": {lib: version(lib) for lib in libs},
        "dtype": "float32",
        "device": "cpu",
        "normalized": True,
        **meta,
    }
    arrays: dict[str, np.ndarray] = {"meta_json": np.array(json.dumps(meta, default=str))}
    for part in PARTS:
        vecs, tokens = result[part]
        arrays |= pack([x["id"] for x in items[part]], vecs, tokens, part)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **arrays)
    LOG.info("wrote %s: %s", args.out, {p: len(arrays[f"{p}_vectors"]) for p in PARTS})
    if args.bf16_out is not None:
        torch.manual_seed(0)  # as a process of its own starts
        write_bf16(args.bf16_out, str(args.checkpoint), texts, args.batch_size, args.library)


if __name__ == "__main__":
    main()
