"""Encode the parity corpus with sentence-transformers and write the embeddings to an .npz file.

    python encode_reference.py --checkpoint DIR --corpus corpus.json --out FILE.npz \
        [--batch-size 8]

Runs in the sentence-transformers reference venv, fp32 on the CPU. For every prompt name the
checkpoint declares (and no prompt) and every Matryoshka size it declares (and the full
size), ``SentenceTransformer.encode(texts, prompt_name=..., truncate_dim=...)`` with the
library's defaults. The .npz needs no pickle:

  ids                       <U  [n]        item ids from the corpus
  emb__<prompt>__<dims>     f32 [n, dims]  <prompt> is a prompt name or "none",
                                           <dims> a size or "full"
  num_tokens__<prompt>      i64 [n]        tokens the transformer saw per text (no padding)
  meta_json                 <U  scalar     json: versions, prompts, dims, max_seq_length ...
"""

from __future__ import annotations

import argparse
import json
import logging
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import torch

LOG = logging.getLogger("encode_reference")


def token_counts(model: Any, texts: list[str], prompt_name: str | None) -> list[int]:
    """Record what the transformer receives, one text at a time (so no batch padding)."""
    backbone = model[0].model
    original_forward = backbone.forward
    seen: list[int] = []

    def recording_forward(*args: Any, **kwargs: Any) -> Any:
        seen.append(int(kwargs["attention_mask"].sum()))
        return original_forward(*args, **kwargs)

    backbone.forward = recording_forward
    try:
        for text in texts:
            model.encode([text], prompt_name=prompt_name, show_progress_bar=False)
    finally:
        backbone.forward = original_forward
    assert len(seen) == len(texts)
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.manual_seed(0)

    from sentence_transformers import SentenceTransformer

    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    ids = [x["id"] for x in corpus["texts"]]
    texts = [x["text"] for x in corpus["texts"]]
    dtype = getattr(torch, args.dtype)
    model = SentenceTransformer(
        str(args.checkpoint), device="cpu", model_kwargs={"torch_dtype": dtype}
    )
    config = json.loads((args.checkpoint / "config.json").read_text())
    full = model.get_embedding_dimension()
    dims = [d for d in config.get("matryoshka_dimensions", []) if d != full]

    arrays: dict[str, np.ndarray] = {"ids": np.array(ids)}
    with torch.inference_mode():
        for prompt_name in [None, *model.prompts]:
            key = prompt_name or "none"
            for truncate_dim in [None, *dims]:
                vectors = model.encode(
                    texts,
                    prompt_name=prompt_name,
                    truncate_dim=truncate_dim,
                    batch_size=args.batch_size,
                    convert_to_tensor=True,
                    show_progress_bar=False,
                )
                vectors = vectors.float().numpy()
                arrays[f"emb__{key}__{truncate_dim or 'full'}"] = vectors
            arrays[f"num_tokens__{key}"] = np.array(token_counts(model, texts, prompt_name))

    meta = {
        "versions": {
            lib: version(lib)
            for lib in ("torch", "transformers", "tokenizers", "sentence-transformers")
        },
        "modules": [type(m).__name__ for m in model],
        "prompts": model.prompts,
        "default_prompt_name": model.default_prompt_name,
        "dimension": full,
        "matryoshka_dimensions": dims,
        "max_seq_length": model.max_seq_length,
        "batch_size": args.batch_size,
        "dtype": args.dtype,
        "device": "cpu",
    }
    arrays["meta_json"] = np.array(json.dumps(meta))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **arrays)
    LOG.info("wrote %s: %d texts, keys %s", args.out, len(texts), sorted(arrays))


if __name__ == "__main__":
    main()
