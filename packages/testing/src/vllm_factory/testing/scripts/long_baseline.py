"""The in-process baseline of the bench's long-document workload (``--workload long``), run in
the reference library's venv by path (``bench.run_reference``), with ``baseline.py``'s
arguments and output::

    python long_baseline.py --library gliner --checkpoint DIR --texts texts.json --out raw.json \
        --device cpu --dtype float32 --warmup 4 --requests 8 --batch-sizes 1,16,64 \
        --labels a,b --threshold 0.5 [--overlap N]
    python long_baseline.py --library gliner2 ... --schema JSON --threshold 0.5 \
        [--chunk-size 384 --chunk-overlap 64]

Each run reads ``texts[W : W + requests]`` (documents, cyclically) once per batch size b, b
being the windows per model call:

- ``gliner`` (no long-text API): the documents' windows as the testing kit's long reference
  (``gliner_long_encode.py``) cuts and merges them -- gliner's word splitter, windows of at
  most the checkpoint's ``max_len`` words and the tokens its prompt leaves, ``--overlap`` words
  shared (default ``max_len // 4``, the plugin's), gliner's model scoring each window's text, the candidates above the threshold
  merged (the higher score of a span two windows hold) and gliner's ``greedy_search`` over the
  whole document (``flat_ner``, no multi-label). At b = 1 one document at a time, its windows
  one per call (a document's latency: its own time); at b > 1 the windows of all the run's
  documents in order, b per call, then each document merged (every latency: the run's wall).
- ``gliner2``: ``GLiNER2.extract_long(text, schema, batch_size=1)`` per document at b = 1;
  ``GLiNER2.batch_extract_long(documents, schema, batch_size=b)`` (all documents' windows,
  b per call) at b > 1; ``chunk_size`` / ``chunk_overlap`` the library's defaults unless given.

Warm-up (not timed): ``--warmup`` windows of the first document one by one, then each batch
size once on a document of its first windows (as many as the batch size on a GPU, two on CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Reads ``documents`` at ``batch_size`` windows a call; returns nothing (timed by the caller).
Reader = Callable[[list[str], int], Any]


def load_gliner(args: argparse.Namespace) -> tuple[Reader, Callable[[str], list[str]], dict]:
    import numpy as np
    import torch
    from gliner import GLiNER
    from gliner.decoding.decoder import Span
    from gliner_long_encode import WORDS, token_windows, tokens_and_room

    model = GLiNER.from_pretrained(args.checkpoint, local_files_only=True)
    model = model.to(args.device).to(getattr(torch, args.dtype)).eval()
    labels = args.labels.split(",")
    max_len = int(model.config.max_len)
    overlap = max_len // 4 if args.overlap is None else args.overlap

    def cut(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[str]]:
        spans = [(m.start(), m.end()) for m in WORDS.finditer(text)]
        tokens, room = tokens_and_room(model, [text[a:b] for a, b in spans], labels)
        bounds = token_windows(tokens, room, max_len, overlap)
        pieces = [text[spans[a][0] : spans[b - 1][1]] for a, b in bounds]
        return spans, bounds, pieces

    @torch.inference_mode()
    def score(pieces: list[str]) -> list[np.ndarray]:
        """gliner's sigmoid scores ``[words, max_width, labels]`` of each piece read alone."""
        prepared = model.prepare_batch(pieces, labels)
        batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
        probs = torch.sigmoid(model.run_batch(batch).logits.float()).cpu().numpy()
        return [probs[i, : len(tokens)] for i, tokens in enumerate(prepared["tokens"])]

    def merge(text, spans, bounds, scores) -> list[dict]:
        best: dict[tuple[int, int, int], float] = {}
        for (first, end), probs in zip(bounds, scores, strict=True):
            size = end - first
            inside = np.arange(size)[:, None] + np.arange(probs.shape[1])[None, :] < size
            hits = np.argwhere((probs > args.threshold) & inside[:, :, None]).tolist()
            for start, width, label in hits:
                value = float(probs[start, width, label])
                key = (first + start, first + start + width, label)
                best[key] = max(best.get(key, value), value)
        ordered = [Span(s, e, labels[c], v) for (s, e, c), v in sorted(best.items())]
        kept = model.decoder.greedy_search(ordered, True, False)
        return [{"start": spans[k.start][0], "end": spans[k.end][1], "label": k.entity_type,
                 "score": k.score, "text": text[spans[k.start][0] : spans[k.end][1]]}
                for k in kept]  # fmt: skip

    def read(documents: list[str], batch_size: int) -> Any:
        cuts = [cut(text) for text in documents]
        pieces = [piece for _, _, doc_pieces in cuts for piece in doc_pieces]
        scores = []
        for offset in range(0, len(pieces), batch_size):
            scores += score(pieces[offset : offset + batch_size])
        out, offset = [], 0
        for text, (spans, bounds, _) in zip(documents, cuts, strict=True):
            out.append(merge(text, spans, bounds, scores[offset : offset + len(bounds)]))
            offset += len(bounds)
        return out

    def window_texts(text: str) -> list[str]:
        return cut(text)[2]

    settings = {"labels": labels, "threshold": args.threshold, "max_len": max_len,
                "overlap": overlap, "windowing": "gliner_long_encode (the kit's reference)"}  # fmt: skip
    return read, window_texts, settings


def load_gliner2(args: argparse.Namespace) -> tuple[Reader, Callable[[str], list[str]], dict]:
    import torch
    from gliner2 import GLiNER2, Schema
    from gliner2.inference.chunking import split_text_into_chunks

    model = GLiNER2.from_pretrained(args.checkpoint).to(args.device)
    model = model.to(getattr(torch, args.dtype)).eval()
    schema = Schema.from_dict(json.loads(args.schema))
    window = {"chunk_size": args.chunk_size or 384, "chunk_overlap": args.chunk_overlap}
    if args.chunk_overlap is None:
        window["chunk_overlap"] = 64

    def read(documents: list[str], batch_size: int) -> Any:
        options = {"batch_size": batch_size, "threshold": args.threshold, **window}
        if len(documents) == 1:
            return [model.extract_long(documents[0], schema, **options)]
        return model.batch_extract_long(documents, schema, **options)

    def window_texts(text: str) -> list[str]:
        return [c.text for c in split_text_into_chunks(text, **window)]

    settings = {"schema": json.loads(args.schema), "threshold": args.threshold, **window,
                "windowing": "GLiNER2.extract_long / batch_extract_long"}  # fmt: skip
    return read, window_texts, settings


LIBRARIES = {"gliner": load_gliner, "gliner2": load_gliner2}


def time_runs(read: Reader, windows_of: Callable[[str], list[str]], texts: list[str],
              args: argparse.Namespace) -> list[dict]:  # fmt: skip
    import torch

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    sizes = sorted({int(b) for b in args.batch_sizes.split(",")})
    first = windows_of(texts[0])
    for piece in first[: args.warmup]:
        read([piece], 1)
    for size in sizes:  # every batch size once, on a document of the first's windows
        read([" ".join(first[: size if args.device.startswith("cuda") else 2])], size)
    sync()
    runs = []
    for batch_size in sizes:
        indices = [(args.warmup + k) % len(texts) for k in range(args.requests)]
        documents = [texts[i] for i in indices]
        latencies: list[float] = []
        started = time.perf_counter()
        if batch_size == 1:  # one document at a time, one window per call
            for text in documents:
                begun = time.perf_counter()
                read([text], 1)
                sync()
                latencies.append(time.perf_counter() - begun)
        else:  # the windows of all documents, batch_size per call
            read(documents, batch_size)
            sync()
            latencies = [time.perf_counter() - started] * len(documents)
        wall = time.perf_counter() - started
        runs.append({"batch_size": batch_size, "indices": indices, "latencies_s": latencies,
                     "wall_seconds": wall})  # fmt: skip
        words = sum(len(text.split()) for text in documents)
        print(f"{args.library} long, {batch_size} windows a call: "
              f"{len(documents) / wall:.3f} documents/s, {words / wall:.0f} words/s", flush=True)  # fmt: skip
    return runs


def main(argv: list[str] | None = None) -> None:
    from baseline import parser

    ap = parser(__doc__.splitlines()[0], LIBRARIES)
    ap.add_argument("--warmup", type=int, default=4, help="windows of the first document")
    ap.add_argument("--requests", type=int, default=8, help="documents per batch size")
    ap.add_argument("--batch-sizes", default="1,16,64", help="windows per model call")
    ap.add_argument("--min-batches", type=int, default=1, help="accepted, unused")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--labels", default="", help="gliner: comma-separated entity labels")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--overlap", type=int, default=None, help="gliner: words windows share")
    ap.add_argument("--schema", default="{}", help="gliner2: the schema, Schema.from_dict JSON")
    ap.add_argument("--chunk-size", type=int, default=None, help="gliner2: words per window")
    ap.add_argument("--chunk-overlap", type=int, default=None, help="gliner2: words shared")
    args = ap.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    texts: list[str] = json.loads(args.texts.read_text(encoding="utf-8"))["texts"]
    read, windows_of, settings = LIBRARIES[args.library](args)
    runs = time_runs(read, windows_of, texts, args)
    result = {
        "versions": {name: version(name) for name in (args.library, "torch", "transformers")},
        "settings": {
            "device": args.device,
            "dtype": args.dtype,
            "torch_threads": torch.get_num_threads(),
            **settings,
            "documents": args.requests,
            "warmup_windows": args.warmup,
        },
        "runs": runs,
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
