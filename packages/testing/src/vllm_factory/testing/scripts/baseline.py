"""The in-process baseline of the benchmark runner, for every reference library.

Run as a script in the reference library's own venv (it imports nothing of vllm-factory;
``bench.run_reference`` runs it by path)::

    python baseline.py --library pylate --checkpoint DIR --texts texts.json --out raw.json \
        --device cpu --dtype float32 --warmup 8 --requests 30 --batch-sizes 1,8,32 \
        --min-batches 2 [--threads K] [--labels a,b,c --threshold 0.5] [--schema JSON] \
        [--adapters DIR,DIR,...] [--inputs images|queries|texts --model-class M:C --processor-class M:C]

Loads the checkpoint with the library's own class, runs ``--warmup`` texts unmeasured, then
for each batch size b runs ``texts[W : W + max(requests, min_batches * b)]`` (cyclically) in
consecutive chunks of b, one library call per chunk (batch size 1 is the sequential
baseline; a text's latency is its chunk's wall time). Writes raw timings only
(``{"versions", "settings", "runs": [{"batch_size", "indices", "latencies_s",
"wall_seconds"}]}``); the runner computes the statistics.

Libraries, each called as its users call it on the texts the served requests carry:
``pylate`` (``models.ColBERT.encode``, documents), ``sentence-transformers``
(``SentenceTransformer.encode``, no prompt), ``gliner`` (``GLiNER.inference`` with
``--labels`` and ``--threshold``), ``gliner2`` (``GLiNER2.batch_extract`` with one schema for
every text, ``--schema`` in ``Schema.from_dict`` form, and ``--threshold``; with ``--adapters``
text ``i`` under the ``i % n``-th LoRA adapter folder: each chunk's texts grouped by adapter,
each group one call after ``unload_adapter`` + ``load_adapter`` where another adapter is
loaded), ``colpali-engine``
(``--model-class`` ``from_pretrained``, then ``--processor-class``'s ``process_images`` on the
images whose file paths the texts file lists (``--inputs images``; each opened with PIL in the
timed part), ``process_queries`` (``--inputs queries``) or ``process_texts``, then the model;
the token vectors are moved to the CPU and split per item, as colpali-engine's examples do).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable
from importlib.metadata import version
from pathlib import Path
from typing import Any

Encode = Callable[[list[str]], Any]


def load_pylate(args: argparse.Namespace) -> tuple[Encode, dict[str, Any]]:
    from pylate import models

    model = prepare(models.ColBERT(args.checkpoint, device=args.device), args)

    def encode(chunk: list[str]) -> Any:
        return model.encode(chunk, batch_size=len(chunk), is_query=False, show_progress_bar=False)

    return encode, {"document_length": model.document_length}


def load_sentence_transformers(args: argparse.Namespace) -> tuple[Encode, dict[str, Any]]:
    from sentence_transformers import SentenceTransformer

    model = prepare(SentenceTransformer(args.checkpoint, device=args.device), args)

    def encode(chunk: list[str]) -> Any:
        return model.encode(chunk, batch_size=len(chunk), show_progress_bar=False)

    return encode, {"max_seq_length": model.max_seq_length}


def load_gliner(args: argparse.Namespace) -> tuple[Encode, dict[str, Any]]:
    from gliner import GLiNER

    model = GLiNER.from_pretrained(args.checkpoint, local_files_only=True)
    model = prepare(model.to(args.device), args)
    labels = args.labels.split(",")

    def encode(chunk: list[str]) -> Any:
        return model.inference(chunk, labels, threshold=args.threshold, batch_size=len(chunk))

    return encode, {"labels": labels, "threshold": args.threshold}


def load_gliner2(args: argparse.Namespace) -> tuple[Encode, dict[str, Any]]:
    from gliner2 import GLiNER2, Schema

    model = prepare(GLiNER2.from_pretrained(args.checkpoint).to(args.device), args)
    schema = json.loads(args.schema)

    def extract(texts: list[str]) -> Any:
        return model.batch_extract(
            texts, Schema.from_dict(schema), batch_size=len(texts), threshold=args.threshold
        )

    settings = {"schema": schema, "threshold": args.threshold}
    adapters = adapter_folders(args)
    if not adapters:
        return extract, settings
    import warnings

    warnings.filterwarnings("ignore", category=PendingDeprecationWarning)  # load_adapter's
    loaded: list[int] = []  # the adapter on the model now

    def encode(chunk: list[tuple[str, int]]) -> Any:
        groups: dict[int, list[str]] = {}
        for text, adapter in chunk:
            groups.setdefault(adapter, []).append(text)
        out = []
        for adapter, texts in groups.items():
            if loaded != [adapter]:
                if loaded:
                    model.unload_adapter()
                model.load_adapter(adapters[adapter])
                loaded[:] = [adapter]
            out += extract(texts)
        return out

    return encode, {**settings, "adapters": len(adapters), "adapter_switch": "load_adapter"}


def adapter_folders(args: argparse.Namespace) -> list[str]:
    """``--adapters``' folders (empty: the base model)."""
    return [folder for folder in args.adapters.split(",") if folder]


def with_adapters(texts: list[str], adapters: int) -> list[Any]:
    """Text ``i`` with the index of its adapter, ``i % adapters`` (round-robin, as the served
    requests name theirs); ``texts`` as they are without adapters."""
    return [(text, i % adapters) for i, text in enumerate(texts)] if adapters else texts


def load_colpali_engine(args: argparse.Namespace) -> tuple[Encode, dict[str, Any]]:
    try:  # where torchvision cannot load (CPU hosts), transformers' PIL image processors
        from vllm_factory.heads.colpali.image_processing import use_pil_image_processors
    except ImportError:  # a venv without vllm-factory-colpali: torchvision must work there
        pass
    else:
        use_pil_image_processors()
    import importlib

    import torch
    from PIL import Image

    def load(spec: str) -> Any:
        module, _, name = spec.partition(":")
        return getattr(importlib.import_module(module), name)

    dtype = getattr(torch, args.dtype)
    model = load(args.model_class).from_pretrained(args.checkpoint, dtype=dtype)
    model = prepare(model.to(args.device), args)
    processor = load(args.processor_class).from_pretrained(args.checkpoint)

    def encode(chunk: list[str]) -> Any:
        if args.inputs == "images":
            batch = processor.process_images([Image.open(path) for path in chunk])
        elif args.inputs == "queries":
            batch = processor.process_queries(chunk)
        else:
            batch = processor.process_texts(chunk)
        with torch.inference_mode():
            vectors = model(**batch.to(args.device))
        return list(torch.unbind(vectors.to("cpu")))

    return encode, {
        "inputs": args.inputs,
        "model_class": args.model_class,
        "processor_class": args.processor_class,
        # A wrapper module (a reference kept beside the package) may hold the config deeper.
        "attn_implementation": getattr(
            getattr(model, "config", None), "_attn_implementation", None
        ),
        "image_processor_size": dict(getattr(processor.image_processor, "size", {}) or {}),
    }


LIBRARIES = {
    "pylate": load_pylate,
    "sentence-transformers": load_sentence_transformers,
    "gliner": load_gliner,
    "gliner2": load_gliner2,
    "colpali-engine": load_colpali_engine,
}


def prepare(model: Any, args: argparse.Namespace) -> Any:
    import torch

    model.to(getattr(torch, args.dtype))
    model.eval()
    return model


def time_batches(encode: Encode, texts: list[Any], args: argparse.Namespace) -> list[dict]:
    import torch

    def run(chunk: list[Any]) -> None:
        encode(chunk)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    for index in range(args.warmup):
        run([texts[index % len(texts)]])
    runs = []
    for batch_size in sorted({int(b) for b in args.batch_sizes.split(",")}):
        count = max(args.requests, args.min_batches * batch_size)
        indices = [(args.warmup + k) % len(texts) for k in range(count)]
        latencies: list[float] = []
        started = time.perf_counter()
        for offset in range(0, count, batch_size):
            chunk = indices[offset : offset + batch_size]
            chunk_started = time.perf_counter()
            run([texts[i] for i in chunk])
            latencies += [time.perf_counter() - chunk_started] * len(chunk)
        wall = time.perf_counter() - started
        runs.append(
            {"batch_size": batch_size, "indices": indices, "latencies_s": latencies,
             "wall_seconds": wall}
        )  # fmt: skip
        print(f"{args.library} batch size {batch_size}: {count / wall:.2f} texts/s", flush=True)
    return runs


def parser(description: str, libraries: Iterable[str]) -> argparse.ArgumentParser:
    """The options every baseline script takes: the library, its checkpoint, the texts, the
    result file, device and dtype."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--library", choices=sorted(libraries), required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--texts", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    return ap


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__.splitlines()[0], LIBRARIES)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--min-batches", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--versions-of",
        default="",
        help="comma-separated distributions whose versions the result records too",
    )
    ap.add_argument("--labels", default="", help="gliner: comma-separated entity labels")
    ap.add_argument("--threshold", type=float, default=0.5, help="gliner(2): score threshold")
    ap.add_argument("--schema", default="{}", help="gliner2: the schema, Schema.from_dict JSON")
    ap.add_argument(
        "--adapters", default="",
        help="gliner2: comma-separated LoRA adapter folders, text i under the (i % n)-th",
    )  # fmt: skip
    ap.add_argument(
        "--inputs", choices=("images", "queries", "texts"), default="images",
        help="colpali-engine: the texts file lists image paths, queries or text documents",
    )  # fmt: skip
    ap.add_argument("--model-class", default="colpali_engine.models:ColQwen3",
                    help="colpali-engine: module:Class of the model")  # fmt: skip
    ap.add_argument("--processor-class", default="colpali_engine.models:ColQwen3Processor",
                    help="colpali-engine: module:Class of the processor")  # fmt: skip
    args = ap.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    texts: list[str] = json.loads(args.texts.read_text(encoding="utf-8"))["texts"]
    if args.adapters and args.library != "gliner2":
        ap.error("--adapters: gliner2 only")
    encode, settings = LIBRARIES[args.library](args)
    texts = with_adapters(texts, len(adapter_folders(args)))
    runs = time_batches(encode, texts, args)
    result = {
        "versions": {
            name: version(name)
            for name in (
                args.library,
                "torch",
                "transformers",
                *filter(None, args.versions_of.split(",")),
            )
        },
        "settings": {
            "device": args.device,
            "dtype": args.dtype,
            "torch_threads": torch.get_num_threads(),
            **settings,
        },
        "runs": runs,
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
