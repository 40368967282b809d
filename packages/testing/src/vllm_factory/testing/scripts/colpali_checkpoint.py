"""What every ColPali-family checkpoint builder shares (runs in the family's reference venvs, as
``import colpali_checkpoint`` beside a builder: ``refenv.ReferenceEnv.run`` puts this folder on
``PYTHONPATH``).

A builder trains its tokenizer on :func:`corpus_texts`, builds its random model with the
library's (or transformers') own classes, writes it with :func:`save` and checks the reload:
:func:`check_same_weights`, :func:`check_same_ids`, ``colpali_encode.check_not_degenerate`` on
one document, then :func:`log_saved`.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tiny_checkpoint import training_texts

LOG = logging.getLogger("build_checkpoint")
# Stdlib modules whose docstrings widen the tokenizers' training text (no characters held out:
# the family's corpus never needs an unknown token).
DOC_MODULES = ["argparse", "collections", "csv", "datetime", "email", "json", "logging", "os",
               "pathlib", "re", "string", "textwrap", "unittest", "urllib.parse"]  # fmt: skip


def corpus_texts(corpus: Path, extra: Sequence[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """The corpus (queries, documents, image specs) and the tokenizer's training texts: its
    queries, documents and image texts, ``extra``, then the docstrings of :data:`DOC_MODULES`."""
    data = json.loads(corpus.read_text(encoding="utf-8"))
    texts = [x["text"] for part in ("queries", "documents") for x in data[part]]
    texts += [x.get("text", "") for x in data.get("images", [])]
    return data, training_texts([*texts, *extra], DOC_MODULES, held_out=False)


def save(out: Path, model: Any, processor: Any) -> None:
    """``model`` and ``processor`` ``save_pretrained(out)``, into a fresh folder."""
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)
    processor.save_pretrained(out)


def check_same_weights(
    ours: Mapping[str, torch.Tensor], theirs: Mapping[str, torch.Tensor]
) -> None:
    """Raise unless the reloaded state dict ``theirs`` holds ``ours`` exactly."""
    if ours.keys() != theirs.keys():
        raise RuntimeError(f"weights renamed on reload: {sorted(set(ours) ^ set(theirs))[:5]}")
    bad = [k for k, v in ours.items() if not torch.equal(v, theirs[k])]
    if bad:
        raise RuntimeError(f"weights changed on reload: {bad[:5]}")


def check_same_ids(
    saved: Any, reloaded: Any, probes: Sequence[str], method: str = "process_queries"
) -> None:
    """Raise unless the reloaded processor gives each probe the saved one's token ids
    (``method``: the processor's ``process_queries`` or ``process_texts``)."""
    for probe in probes:
        ids = [getattr(p, method)([probe])["input_ids"].tolist() for p in (saved, reloaded)]
        if ids[0] != ids[1]:
            raise RuntimeError(f"tokenizer changed on reload ({method} of {probe[:40]!r})")


def log_saved(args: argparse.Namespace, model: Any, mean_cos: float, note: str = "") -> None:
    """The builder's last line: where, what size and seed, how many parameters, the mean token
    cosine in one document, ``note`` and the files written."""
    LOG.info(
        "saved %s (%s, seed %d): %d parameters, mean token cosine in one doc %.3f%s; files: %s",
        args.out, args.size, args.seed, sum(p.numel() for p in model.parameters()), mean_cos,
        f", {note}" if note else "", sorted(p.name for p in args.out.iterdir()),
    )  # fmt: skip
