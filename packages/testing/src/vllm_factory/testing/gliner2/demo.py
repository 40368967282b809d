"""The GLiNER2 packages' demo: build a tiny GLiNER2 checkpoint offline with the library's own
classes, serve the library's own directory with vLLM (``--config-format gliner2``), send one
request per schema kind and one mixed schema, and print the answers.

The weights are random (calibrated so that every decoder path shows something): the answers
show the request/response shapes, not a trained model's judgement. Needs vLLM and httpx.
"""

from __future__ import annotations

import json
import logging
from types import ModuleType

from vllm_factory.testing.server import VllmServer

TEXT = (
    "Apple hired Tim Cook in Cupertino in 1998, and the company later opened an office in "
    "Austin, Texas, where it plans to hire 5,000 engineers."
)
REQUESTS = {
    "entities (extract_entities)": {"entities": ["company", "person", "location", "date"]},
    "classification (classify_text)": {
        "classifications": {"sentiment": ["positive", "negative", "neutral"]}
    },
    "structure (extract_json)": {
        "structures": {"hire": ["company::str", "person::str", "place", "kind::[new|promotion]"]}
    },
    "relations (extract_relations)": {"relations": ["works_for", "located_in"]},
    "mixed schema (Schema.to_dict() form)": {
        "schema": {
            "entities": {"company": "a business", "location": {"threshold": 0.4}},
            "classifications": [{"task": "topic", "labels": ["business", "sports", "science"]}],
            "relations": ["located_in"],
        },
        "include_confidence": True,
        "include_spans": True,
    },
}


def run_demo(reference: ModuleType) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    checkpoint = reference.reference_dir() / "checkpoint"
    with VllmServer(checkpoint, extra_args=["--config-format", "gliner2"]) as server:
        print(f"server healthy after {server.startup_seconds:.1f} s at {server.url}")
        print(f"text: {TEXT}")
        for title, data in REQUESTS.items():
            response = server.pooling({"text": TEXT, **data})
            response.raise_for_status()
            print(f"\n{title}\n  request data: {json.dumps(data)}")
            print(f"  answer: {json.dumps(response.json()['data'], ensure_ascii=False)}")
