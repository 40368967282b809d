"""Build a small, seeded, offline EmbeddingGemma-style sentence-transformers checkpoint.

Runs in the sentence-transformers reference venv (no hub access needed):

    python build_checkpoint.py --out DIR [--seed 0] [--corpus corpus.json] [--size test|bench]

Steps: train a BPE tokenizer (Gemma-like specials, <bos> ... <eos>) on the corpus plus stdlib
docstrings; build a random bidirectional ``Gemma3TextModel`` with transformers' own classes;
wrap it with sentence-transformers' own modules in EmbeddingGemma's layout (Transformer ->
mean Pooling -> Dense -> Dense -> Normalize, with task prompts) and save that layout into DIR.
``matryoshka_dimensions`` is then written into DIR/config.json: the key vLLM reads, and the
place this project takes a checkpoint's Matryoshka sizes from (see the package README).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from tiny_checkpoint import HELD_OUT, bpe_tokenizer, extra_text
from tokenizers import decoders, pre_tokenizers
from transformers import Gemma3TextConfig, Gemma3TextModel, PreTrainedTokenizerFast

LOG = logging.getLogger("build_checkpoint")
HERE = Path(__file__).resolve().parent
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]  # Gemma's order: pad 0, eos 1, bos 2, unk 3

# head_dim 32 (vLLM's CPU attention only takes 32/64 in tiny models, which matters for the
# native comparison). GQA (4 query heads, 2 KV heads) and a short sliding window (16 -> keys
# within 8 tokens either side) so that both are exercised by the corpus.
TEST_SHAPE = {
    "hidden": 128,
    "heads": 4,
    "kv_heads": 2,
    "head_dim": 32,
    "inter": 256,
    "layer_types": [
        "sliding_attention",
        "sliding_attention",
        "full_attention",
        "sliding_attention",
    ],
    "sliding_window": 16,
    "max_pos": 512,
    "max_seq_length": 256,
    "dense": [(128, 256), (256, 128)],
    "matryoshka": [128, 64, 32],
}
# For `nox -s bench`: EmbeddingGemma-300M's published widths (hidden 768, 3 query heads + 1 KV
# head of 256, MLP 1152, 24 layers, five 512-token sliding-window layers per global one,
# Dense 768 -> 3072 -> 768), random weights; the vocabulary stays the small local tokenizer's.
BENCH_SHAPE = {
    "hidden": 768,
    "heads": 3,
    "kv_heads": 1,
    "head_dim": 256,
    "inter": 1152,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 4,
    "sliding_window": 512,
    "max_pos": 2048,
    "max_seq_length": 2048,
    "dense": [(768, 3072), (3072, 768)],
    "matryoshka": [768, 512, 256, 128],
}
SHAPES = {"test": TEST_SHAPE, "bench": BENCH_SHAPE}
PROMPTS = {
    "query": "task: search result | query: ",
    "document": "title: none | text: ",
    "clustering": "task: clustering | query: ",
}
DOC_MODULES = ["argparse", "collections", "json", "logging", "os", "pathlib", "re", "string"]


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Case-keeping BPE on SentencePiece-style word boundaries, ``<bos> text <eos>``."""

    def shape(tok) -> None:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()

    return bpe_tokenizer(
        texts, vocab_size, SPECIALS, ("<bos>", "<eos>"), shape, bos_token="<bos>",
        eos_token="<eos>", unk_token="<unk>", pad_token="<pad>", model_max_length=2048,
    )  # fmt: skip


def build_backbone(tok: PreTrainedTokenizerFast, seed: int, shape: dict) -> Gemma3TextModel:
    """A random bidirectional Gemma3 text model; norm weights randomised too (HF inits 0)."""
    config = Gemma3TextConfig(
        vocab_size=len(tok),
        hidden_size=shape["hidden"],
        intermediate_size=shape["inter"],
        num_hidden_layers=len(shape["layer_types"]),
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        head_dim=shape["head_dim"],
        query_pre_attn_scalar=shape["head_dim"],
        layer_types=shape["layer_types"],
        sliding_window=shape["sliding_window"],
        max_position_embeddings=shape["max_pos"],
        use_bidirectional_attention=True,
        hidden_activation="gelu_pytorch_tanh",
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        initializer_range=0.1,
    )
    torch.manual_seed(seed)
    model = Gemma3TextModel(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.normal_(0.0, 0.2)
    return model


def check_not_degenerate(model, texts: list[str]) -> float:
    """Mean off-diagonal cosine between different texts' embeddings: must be well below 1."""
    vecs = model.encode(texts, convert_to_numpy=True)
    sims = vecs @ vecs.T
    n = len(vecs)
    mean_off = float((sims.sum() - np.trace(sims)) / (n * n - n))
    if mean_off > 0.95:
        raise RuntimeError(f"degenerate embeddings (mean off-diagonal cosine {mean_off:.3f})")
    return mean_off


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", type=Path, default=HERE / "corpus.json")
    ap.add_argument("--vocab-size", type=int, default=3000)
    ap.add_argument("--size", choices=sorted(SHAPES), default="test")
    args = ap.parse_args()
    shape = SHAPES[args.size]
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    texts = [x["text"].translate(HELD_OUT) for x in corpus["texts"]] + extra_text(DOC_MODULES)
    texts += list(PROMPTS.values())
    tok = train_tokenizer(texts, args.vocab_size)
    LOG.info("tokenizer vocab: %d", len(tok))

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Dense,
        Normalize,
        Pooling,
        Transformer,
    )

    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        build_backbone(tok, args.seed, shape).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        torch.manual_seed(args.seed + 1)  # reproducible Dense init
        transformer = Transformer(str(backbone_dir), max_seq_length=shape["max_seq_length"])
        modules = [transformer, Pooling(shape["hidden"], pooling_mode="mean")]
        for in_features, out_features in shape["dense"]:
            modules.append(
                Dense(
                    in_features, out_features, bias=False, activation_function=torch.nn.Identity()
                )
            )
        modules.append(Normalize())
        model = SentenceTransformer(modules=modules, device="cpu", prompts=PROMPTS)
        if args.out.exists():
            shutil.rmtree(args.out)
        model.save(str(args.out))

    config_path = args.out / "config.json"
    config = json.loads(config_path.read_text())
    config["matryoshka_dimensions"] = shape["matryoshka"]
    config_path.write_text(json.dumps(config, indent=2) + "\n")

    reloaded = SentenceTransformer(str(args.out), device="cpu")
    mean_cos = check_not_degenerate(reloaded, [x["text"] for x in corpus["texts"][:12]])
    LOG.info(
        "saved %s (seed %d); modules %s; mean cosine between texts %.3f; files: %s",
        args.out,
        args.seed,
        [type(m).__name__ for m in reloaded],
        mean_cos,
        sorted(p.name for p in args.out.iterdir()),
    )


if __name__ == "__main__":
    main()
