"""The PyLate half of every ColBERT package's tiny reference checkpoint (runs in the PyLate
venv, imported by the package's ``reference/build_checkpoint.py``; ``refenv.ReferenceEnv.run``
puts this folder on ``PYTHONPATH``).

A package's builder trains its tokenizer and builds its random backbone with transformers' own
classes; :func:`main` saves both to a temporary backbone directory, lets PyLate wrap it
(``models.ColBERT``: "[Q] "/"[D] " tokens, a random Dense projection) and saves PyLate's real
on-disk layout::

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|...] [--corpus corpus.json]
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tiny_checkpoint import builder_arguments, training_texts

LOG = logging.getLogger("build_checkpoint")
DOC_MODULES = [
    "argparse", "collections", "csv", "datetime", "decimal", "email", "functools",
    "http.client", "json", "logging", "os", "pathlib", "re", "statistics", "string",
    "textwrap", "inspect", "unittest", "urllib.parse", "zipfile",
]  # fmt: skip


def check_not_degenerate(colbert: object, texts: list[str]) -> float:
    """Mean off-diagonal cosine between token vectors of one document; must be well below 1."""
    vecs = colbert.encode([texts[0]], is_query=False, convert_to_numpy=True)[0]
    sims = vecs @ vecs.T
    n = len(vecs)
    mean_off = float((sims.sum() - np.trace(sims)) / max(n * n - n, 1))
    if n < 2 or mean_off > 0.95:
        raise RuntimeError(f"degenerate token vectors (mean off-diagonal cosine {mean_off:.3f})")
    return mean_off


def main(
    doc: str,
    sizes: dict[str, dict],
    train_tokenizer: Callable[[list[str], int], Any],
    build_backbone: Callable[[Any, str, int], Any],
    corpus: Path,
    held_out: bool = True,
) -> None:
    """The builder's command line: tokenizer (``train_tokenizer(texts, vocab_size)`` on the
    corpus plus stdlib docstrings, ``held_out`` characters removed), backbone
    (``build_backbone(tokenizer, size, seed)``), then PyLate. ``corpus``: the default of
    ``--corpus`` (the package's own)."""
    args = builder_arguments(doc, sizes, corpus)
    torch.manual_seed(args.seed)
    data = json.loads(args.corpus.read_text(encoding="utf-8"))
    corpus_texts = [x["text"] for part in ("queries", "documents") for x in data[part]]
    tok = train_tokenizer(training_texts(corpus_texts, DOC_MODULES, held_out), args.vocab_size)
    LOG.info("tokenizer vocab: %d", len(tok))

    from pylate import models  # imported late: heavy, and only the PyLate venv has it

    s = sizes[args.size]
    with tempfile.TemporaryDirectory() as tmp:
        backbone_dir = Path(tmp) / "backbone"
        build_backbone(tok, args.size, args.seed).save_pretrained(backbone_dir)
        tok.save_pretrained(backbone_dir)
        # PyLate adds "[Q] "/"[D] " tokens (resizing embeddings) and a random Dense projection
        # (and, with no mask token, pads queries with EOS); re-seed so that the Dense init is
        # reproducible too. PyLate's defaults are kept for prefixes,
        # attend_to_expansion_tokens, do_query_expansion and skiplist_words.
        torch.manual_seed(args.seed + 1)
        colbert = models.ColBERT(
            model_name_or_path=str(backbone_dir),
            device="cpu",
            embedding_size=s["dim"],
            query_length=s["query_length"],
            document_length=s["document_length"],
        )
        if args.out.exists():
            shutil.rmtree(args.out)
        colbert.save(str(args.out))

    reloaded = models.ColBERT(model_name_or_path=str(args.out), device="cpu")
    mean_cos = check_not_degenerate(reloaded, [data["documents"][2]["text"]])
    LOG.info(
        "saved %s (%s, seed %d); mean token cosine in one doc %.3f; files: %s",
        args.out, args.size, args.seed, mean_cos, sorted(p.name for p in args.out.iterdir()),
    )  # fmt: skip
