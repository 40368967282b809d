"""vLLM Factory 0.2's README for the GLiNER models (:mod:`vllm_factory.testing.seed`): its prep
command (``vllm-factory-prep --model SRC --output DIR``), its serve command on the prepared
directory, and its request, whose ``data`` its users read as entity dicts.

A package's ``tests/integration/test_seed_readme.py`` star-imports this module and sets
``README_PLUGIN``, the IOProcessor name the README serves its checkpoint under (the package's
own, or 0.2's linker / reranker name); the fixtures are the GLiNER family's
(``reference_dir``, ``corpus``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from vllm_factory.testing.seed import dumps, entity_problems, post, readme_server

# The README's NER request (mmbert_gliner's curl).
README_NER = {
    "text": "Apple Inc. announced a partnership with OpenAI. Tim Cook presented at WWDC 2024.",
    "labels": ["company", "person", "event"],
    "threshold": 0.3,
}
# The README's linking request (deberta_gliner_linker's curl).
README_LINK = {
    "text": "Tesla announced record earnings in Austin.",
    "labels": ["company", "location"],
    "threshold": 0.3,
    "candidate_labels": ["Tesla Inc.", "Austin, TX", "TSLA"],
}
# Low enough that a tiny random checkpoint finds entities, so that the client loops over some.
CLIENT_THRESHOLD = 0.05


def prep_command(source: Path, out: Path) -> None:
    """``vllm-factory-prep --model SRC --output DIR`` as the README runs it (the console script
    next to this Python)."""
    script = Path(sys.executable).parent / "vllm-factory-prep"
    command = [str(script)] if script.exists() else [sys.executable, "-m",
                                                     "vllm_factory.heads.gliner.prep"]  # fmt: skip
    run = subprocess.run(
        [*command, "--model", str(source), "--output", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.fixture(scope="module")
def readme_dir(reference_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("readme") / "gliner-vllm"
    prep_command(reference_dir / "checkpoint", out)
    return out


@pytest.fixture(scope="module")
def readme_gliner(request, readme_dir: Path):
    """The README's serve command on the prepared directory, under the IOProcessor name the
    test module gives (``README_PLUGIN``: the package's own, or 0.2's linker / reranker
    name for the same IOProcessor)."""
    with readme_server(readme_dir, request.module.README_PLUGIN) as server:
        yield server


def test_readme_request_gets_a_list_of_entity_dicts(readme_gliner):
    data = post(readme_gliner, README_NER)
    assert entity_problems(data, README_NER["text"], README_NER["labels"]) == [], dumps(data)


def test_a_readme_style_client_reads_entities_from_data(readme_gliner, corpus):
    """``for e in resp.json()["data"]: e["text"], e["label"], e["score"]`` over real texts."""
    labels = README_NER["labels"]
    seen = 0
    for text in corpus["texts"][:6]:
        data = post(readme_gliner, {"text": text, "labels": labels,
                                    "threshold": CLIENT_THRESHOLD})  # fmt: skip
        assert entity_problems(data, text, labels) == [], dumps(data)
        for e in data:
            seen += 1
            assert e["text"] in text and e["label"] in labels and 0 <= e["score"] <= 1
    assert seen > 0, "no entity at all: the client loop checked nothing"


def test_several_texts_still_get_one_list_each(readme_gliner):
    texts = [README_NER["text"], "Tim Cook visited Paris."]
    data = post(readme_gliner, {**README_NER, "text": texts, "threshold": CLIENT_THRESHOLD})
    assert isinstance(data, list) and len(data) == 2
    for text, entities in zip(texts, data):
        assert entity_problems(entities, text, README_NER["labels"]) == []


def test_readme_linking_request_links_entities_to_candidate_labels(readme_gliner):
    data = post(readme_gliner, {**README_LINK, "threshold": CLIENT_THRESHOLD})
    text, labels = README_LINK["text"], README_LINK["labels"]
    assert entity_problems(data, text, labels) == [], dumps(data)
    assert data, "no entity to link"
    for entity in data:
        assert entity["linked_to"] is None or entity["linked_to"] in README_LINK["candidate_labels"]
        assert isinstance(entity["linked_score"], float)
        if entity["linked_to"] is not None:
            assert entity["linked_score"] >= CLIENT_THRESHOLD


__all__ = [
    name for name in dir()
    if name.startswith("test_") or name in ("readme_dir", "readme_gliner")
]  # fmt: skip
