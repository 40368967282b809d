"""The GLiNER packages' demos: prepare a tiny gliner checkpoint, serve it, extract entities
(``run_demo``) or link them (``run_linking_demo``).

``run_demo(reference)`` builds the package's tiny checkpoint offline (gliner's own classes, in
its own venv, through the package's reference module), runs ``vllm-factory-prep`` on it as a
user would, starts a real vLLM OpenAI server on the prepared directory (config.json names the
architecture and the IOProcessor, so no plugin flags), sends one NER request and prints the
entities. The weights are random: the entities show the request/response shape, not a trained
model's judgement. Needs vLLM and httpx.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from vllm_factory.testing.server import VllmServer

TEXT = "Marie Curie worked in Paris with Pierre Curie and won the Nobel Prize in 1903."
LABELS = ["person", "city", "award", "date"]


def _prepare(checkpoint: Path, served: Path) -> None:
    """``vllm-factory-prep checkpoint served``, as a user runs it."""
    prep = shutil.which("vllm-factory-prep", path=str(Path(sys.executable).parent))
    command = [prep] if prep else [sys.executable, "-m", "vllm_factory.heads.gliner.prep"]
    subprocess.run([*command, str(checkpoint), str(served)], check=True)


@contextlib.contextmanager
def _served(reference: object) -> Iterator[tuple[VllmServer, Path, Path]]:
    """The reference's tiny checkpoint prepared (:func:`_prepare`) and served: yields the
    running server, the checkpoint and a scratch folder of the demo's own."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    checkpoint = reference.reference_dir() / "checkpoint"
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp) / "served"
        _prepare(checkpoint, served)
        with VllmServer(served) as server:
            print(f"server healthy after {server.startup_seconds:.1f} s at {server.url}")
            yield server, checkpoint, Path(tmp)


def run_demo(reference: ModuleType) -> None:
    with _served(reference) as (server, _, _):
        # One text: its entities (a list of texts: one list per text).
        entities = server.show_pooling({"text": TEXT, "labels": LABELS, "threshold": 0.5})
        print(f"{len(entities)} entities")
        for entity in entities:
            print(
                f"  [{entity['start']:>3}, {entity['end']:>3}) {entity['label']:<7}"
                f" {entity['score']:.3f}  {entity['text']!r}"
            )


LINK_TEXT = "Marie Curie worked in Paris with Pierre Curie; Paris honoured her in 1903."
LINK_CANDIDATES = [
    {"id": "Q7186", "label": "Marie Curie", "description": "physicist and chemist"},
    {"id": "Q37463", "label": "Pierre Curie", "description": "physicist"},
    {"id": "Q90", "label": "Paris", "description": "capital of France"},
    {"id": "Q830149", "label": "Paris", "description": "city in Texas"},
    {"id": "Q47899", "label": "Paris Hilton", "description": "media personality"},
]
LINK_MENTIONS = [(0, 11), (22, 27), (33, 45), (47, 52)]


def run_linking_demo(bi_encoder_reference: object) -> None:
    """The tiny bi-encoder (the GLiNER linker's shape) prepared and served; one request in the
    server's linking form (candidates with ids in, each mention's candidate out); then
    glinker's own pipeline (L1 GLiNER -> L2 dict with 400 entities -> L3 -> L4 -> L0) run in
    process and with its GLiNER layers served (glinker venv), compared."""
    from vllm_factory.testing.gliner.glinker import compare_outputs, linking_inputs, run_pipelines
    from vllm_factory.testing.gliner.references import CORPUS
    from vllm_factory.testing.parity import tolerance

    with _served(bi_encoder_reference) as (server, checkpoint, scratch):
        spans = [{"start": a, "end": b} for a, b in LINK_MENTIONS]
        links = server.show_pooling({
            "text": LINK_TEXT, "candidates": LINK_CANDIDATES, "threshold": 0.0,
            "template": "{label}: {description}", "input_spans": [spans],
        })  # fmt: skip
        print(
            f"{len(links)} mentions linked (random weights: which candidate wins is "
            "arbitrary; the pipeline below checks served == in process)"
        )
        for link in links:
            ranked = ", ".join(f"{c['id']} {c['score']:.3f}" for c in link["candidates"])
            print(f"  {link['text']!r:>16} -> {link['candidate_id']:<8} ({ranked})")
        corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
        data = linking_inputs(corpus)
        local, remote = run_pipelines(server, checkpoint, data, scratch)
        count = sum(len(per_text) for per_text in local["outputs"]["l3_result"]["entities"])
        limit = tolerance(server.dtype).score
        try:
            floats = compare_outputs(remote["outputs"], local["outputs"], limit)
        except AssertionError as difference:
            raise SystemExit(f"glinker pipeline: served and in-process differ: {difference}")
        print(
            f"glinker pipeline, {len(data['entities'])} entities in its dict layer: "
            f"{count} L3 links in process in {local['seconds']:.1f} s, served in "
            f"{remote['seconds']:.1f} s; every layer's output the same ({floats} scores "
            f"within {limit})"
        )
