"""Save a tiny multi-vector checkpoint in sentence-transformers' own layout (MultiVectorEncoder),
on the backbone and tokenizer of an existing tiny PyLate checkpoint (runs in the
sentence-transformers venv; offline):

    python colbert_st_layout.py --from PYLATE_DIR --out DIR --variant native|custom [--seed 0]

- ``native``: what ``MultiVectorEncoder(backbone)`` builds by itself (no prompts, no query
  expansion, no skiplist), the layout a new sentence-transformers user saves;
- ``custom``: text prompts, "min" query expansion (floor 24, ceiling 32, expansion tokens not
  attended), document length 64, a punctuation skiplist on both sides, a 48-wide Dense with bias.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import string
import tempfile
from pathlib import Path

import torch

LOG = logging.getLogger("colbert_st_layout")
# Files of a PyLate directory that belong to the transformer (the rest is PyLate's modules).
BACKBONE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                  "special_tokens_map.json", "tokenizer.model")  # fmt: skip


def build(backbone: Path, variant: str):
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    if variant == "native":
        return MultiVectorEncoder(str(backbone), device="cpu")
    transformer = Transformer(
        str(backbone),
        query_length=32,
        document_length=64,
        query_expansion={"strategy": "min", "length": 24, "attend": False},
    )
    width = transformer.get_embedding_dimension()
    dense = Dense(
        width, 48, bias=True, activation_function=torch.nn.Identity(),
        module_input_name="token_embeddings",
    )  # fmt: skip
    with torch.no_grad():
        dense.linear.bias.normal_(0.0, 0.1)
    modules = [
        transformer,
        dense,
        MultiVectorMask(list(string.punctuation), skiplist_tasks=["query", "document"]),
        Normalize(module_input_name="token_embeddings"),
    ]
    prompts = {"query": "query: ", "document": "passage: "}
    return MultiVectorEncoder(modules=modules, prompts=prompts, device="cpu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="source", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--variant", choices=("native", "custom"), required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        backbone = Path(tmp) / "backbone"
        backbone.mkdir()
        for name in BACKBONE_FILES:
            if (args.source / name).exists():
                shutil.copy(args.source / name, backbone / name)
        model = build(backbone, args.variant)
        if args.out.exists():
            shutil.rmtree(args.out)
        model.save(str(args.out))
    LOG.info("saved %s (%s): modules %s, prompts %s", args.out, args.variant,
             [type(m).__name__ for m in model], model.prompts)  # fmt: skip


if __name__ == "__main__":
    main()
