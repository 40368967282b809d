"""A glinker entity-linking pipeline with its GLiNER layers served vs in process; the
server's own linking form (``data.candidates``) vs glinker's L3 and L4 results.

glinker's own pipeline (``ConfigBuilder``: L1 GLiNER mentions -> L2 dict layer -> L3 GLiNER
linking -> L4 GLiNER reranking -> L0), run twice in the glinker venv on the package's tiny
checkpoint: once as glinker runs it (gliner in process), once with L1, L3 and L4 switched to
``vllm_factory.glinker``'s served processors pointing at the session's real vLLM server. Every
layer's output must agree: same mentions, candidates, links and aggregation, scores within the
parity tolerance.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
from pathlib import Path

import pytest
from vllm_factory.testing.gliner.references import glinker_env
from vllm_factory.testing.parity import tolerance
from vllm_factory.testing.refenv import SCRIPTS
from vllm_factory.testing.report import record

# What a package's test module collects (``from ... import *``).
__all__ = [
    "compare_outputs",
    "glinker_inputs",
    "linking_inputs",
    "test_glinker_pipeline_served_equals_in_process",
]

PIPELINE = SCRIPTS / "glinker_pipeline.py"
TEMPLATE = "{label}: {description}"
L1_LABELS = ["person", "organization", "location", "date"]
LONG = " ".join(["A description far longer than any label encoder takes."] * 12)


def linking_inputs(corpus: dict, max_entities: int = 400, long_descriptions: bool = True) -> dict:
    """The pipeline's inputs: the corpus texts and a dict-layer knowledge base of a few hundred
    entities named after the corpus's words and word pairs (unicode ones included), each name
    twice (a near-duplicate second name with the first as its alias: two candidates per
    mention), some with more aliases and (``long_descriptions``) over-long descriptions."""
    names: dict[str, None] = {}
    for text in corpus["texts"]:
        words = re.findall(r"\w+(?:[-_]\w+)*", text)
        for a, b in zip(words, [*words[1:], ""]):
            if len(a) > 2:
                names.setdefault(a)
            if b and a[:1].isupper() and b[:1].isupper():
                names.setdefault(f"{a} {b}")
    entities = []
    for i, name in enumerate(list(names)[: max_entities // 2]):
        for sense in range(2):
            description = f"{name} ({'first' if sense == 0 else 'second'} sense, entry {i})"
            if long_descriptions and i % 17 == 3 and sense == 1:
                description = f"{description}. {LONG}"
            # The second sense is a near-duplicate name with the first's name as an alias:
            # both are candidates of the same mention.
            label = name if sense == 0 else f"{name} II"
            entity = {"entity_id": f"E{i}-{sense}", "label": label, "description": description,
                      "entity_type": ["person", "organization", "location"][i % 3],
                      "popularity": (i * 37 + sense) % 1000,
                      "aliases": [name] if sense else []}  # fmt: skip
            if i % 11 == 5:
                entity["aliases"] += [name.lower(), name.upper()]
            entities.append(entity)
    return {
        "texts": corpus["texts"], "entities": entities, "template": TEMPLATE,
        "l1_labels": L1_LABELS, "l1_threshold": 0.3, "l3_threshold": 0.3, "l4_threshold": 0.3,
        "l4_max_labels": 3, "max_length": 512,
    }  # fmt: skip


def _client_source() -> str:
    """``src`` folder of the installed ``vllm_factory.glinker`` (found without importing it:
    its ``__init__`` needs glinker, which only the glinker venv has)."""
    spec = importlib.util.find_spec("vllm_factory.glinker")
    assert spec is not None, "vllm-factory-glinker is not installed"
    return str(Path(next(iter(spec.submodule_search_locations))).parents[1])


def compare_outputs(served, local, limit: float, where: str = "") -> int:
    """Same structure, strings and integers; floats within ``limit`` (AssertionError naming
    where they differ). Returns how many floats were compared."""
    if isinstance(local, float) and isinstance(served, (int, float)):
        assert math.isclose(served, local, rel_tol=0, abs_tol=limit), (where, served, local)
        return 1
    assert type(served) is type(local), (where, served, local)
    if isinstance(local, dict):
        assert served.keys() == local.keys(), (where, sorted(served), sorted(local))
        return sum(compare_outputs(served[k], local[k], limit, f"{where}.{k}") for k in local)
    if isinstance(local, list):
        assert len(served) == len(local), (where, len(served), len(local))
        return sum(compare_outputs(s, v, limit, f"{where}[{i}]") for i, (s, v) in
                   enumerate(zip(served, local)))  # fmt: skip
    assert served == local, (where, served, local)
    return 0


def _run(env, args: list, out: Path, extra_path: str | None = None) -> dict:
    path = os.pathsep.join(filter(None, [str(SCRIPTS), extra_path]))
    env.run(PIPELINE, *args, "--out", out, env={"PYTHONPATH": path})
    return json.loads(out.read_text(encoding="utf-8"))


def _served_links(server, inputs: dict, local: dict, rerank: bool) -> list[list[dict]]:
    """What the server's linking form (``data.candidates``) returns for each text given the
    in-process pipeline's L1 mentions and L2 candidates, as L3 (or, with ``rerank``, L4) is
    configured; glinker's field names become ours (``entity_id`` -> ``id``)."""
    outputs = local["outputs"]
    layer = "l4" if rerank else "l3"
    results = []
    for text, mentions, records in zip(
        inputs["texts"], outputs["l1_result"]["entities"], outputs["l2_result"]["candidates"]
    ):
        if not records:  # glinker links nothing without candidates; the server refuses none
            results.append([])
            continue
        fields = ("label", "description", "entity_type", "popularity")
        data = {
            "text": text, "template": inputs["template"], "max_len": inputs["max_length"],
            "threshold": inputs[f"{layer}_threshold"],
            "candidates": [{"id": r["entity_id"], **{k: r[k] for k in fields}} for r in records],
            "input_spans": [[{"start": m["start"], "end": m["end"]} for m in mentions] or None],
            "long_text": "truncate",  # glinker's gliner reads what fits one prompt
        }  # fmt: skip
        if rerank:
            data["max_labels"] = inputs["l4_max_labels"]
        response = server.pooling(data)
        assert response.status_code == 200, response.text
        results.append(response.json()["data"])  # one text: its entities
    return results


def _check_links(
    served: list[list[dict]], local: dict, inputs: dict, key: str, limit: float
) -> int:
    """Served links = glinker's entities of ``key`` plus the candidate each label came from
    (glinker's label -> candidate map: the first record whose label it is, up to case)."""
    records = local["outputs"]["l2_result"]["candidates"]
    for i, (links, entities) in enumerate(zip(served, local["outputs"][key]["entities"])):
        owner: dict[str, str] = {}
        for entry in records[i]:
            owner.setdefault(inputs["template"].format(**entry).lower(), entry["entity_id"])
        plain = [{k: link[k] for k in entities[0]} for link in links] if entities else links
        compare_outputs(plain, entities, limit, f"{key}[{i}]")
        for link in links:
            assert link["candidate_id"] == owner[link["label"].lower()], (key, i, link)
            assert [c["id"] for c in link["candidates"]] == [
                owner[label.lower()] for label in link["class_probs"]
            ]
    return sum(map(len, served))


def _count(outputs: dict, key: str) -> int:
    return sum(len(per_text) for per_text in outputs[key]["entities"])


def run_pipelines(server, checkpoint: Path, data: dict, tmp: Path) -> tuple[dict, dict]:
    """glinker's pipeline on ``data`` (:func:`linking_inputs`) in the glinker venv, with gliner
    in process on ``checkpoint`` and with L1 / L3 / L4 served by ``server``: both results."""
    inputs = tmp / "inputs.json"
    inputs.write_text(json.dumps(data), encoding="utf-8")
    env = glinker_env().ensure()
    common = ["--checkpoint", checkpoint, "--inputs", inputs]
    local = _run(env, common, tmp / "local.json")
    served = _run(
        env, [*common, "--url", server.url, "--model", server.model], tmp / "served.json",
        _client_source(),
    )  # fmt: skip
    return local, served


@pytest.fixture
def glinker_inputs(corpus) -> dict:
    """The pipeline's inputs (a package's test module may narrow them, e.g. for a tiny
    uni-encoder whose one prompt must hold all candidates of a text)."""
    return linking_inputs(corpus)


@pytest.mark.parity
def test_glinker_pipeline_served_equals_in_process(server, reference_dir, glinker_inputs, tmp_path):
    data = glinker_inputs
    local, served = run_pipelines(server, reference_dir / "checkpoint", data, tmp_path)
    assert local["processors"]["l3"] == "l3_batch" and served["processors"]["l3"] == "l3_vllm"
    assert served["processors"]["l1"] == "l1_gliner_vllm"
    assert served["processors"]["l4"] == "l4_vllm"
    limit = tolerance(server.dtype).score
    floats = compare_outputs(served["outputs"], local["outputs"], limit)
    # The server's own linking form, given the same mentions and candidates: glinker's L3 and
    # L4 results with each mention's candidate id.
    for key, rerank in (("l3_result", False), ("l4_result", True)):
        linked = _check_links(_served_links(server, data, local, rerank), local, data, key, limit)
        assert linked == _count(local["outputs"], key) > 0
    mentions, links = _count(local["outputs"], "l1_result"), _count(local["outputs"], "l3_result")
    reranked = _count(local["outputs"], "l4_result")
    candidates = sum(len(group) for group in local["outputs"]["l2_result"]["candidates"])
    record(server.label.removesuffix("_io"), "parity", "glinker", {
        "dtype": server.dtype, "texts": len(data["texts"]), "entities": len(data["entities"]),
        "mentions": mentions, "candidates": candidates, "links": links, "reranked": reranked,
        "scores": floats,
        "seconds_in_process": local["seconds"], "seconds_served": served["seconds"],
    })  # fmt: skip
    print(
        f"\nglinker pipeline ({server.dtype}): {len(data['texts'])} texts, "
        f"{len(data['entities'])} entities; {mentions} L1 mentions, {candidates} L2 candidates, "
        f"{links} L3 links, {reranked} L4 links (candidates in chunks of 3) identical served "
        f"and in process ({floats} scores within {limit}), and from the server's "
        f"data.candidates form with candidate ids; "
        f"{local['seconds']:.1f} s in process, {served['seconds']:.1f} s served"
    )
    assert mentions > 0 and candidates > 0 and links > 0 and reranked > 0
