"""Per-request LoRA adapters, served vs the gliner2 library (the family's LoRA suite; a
package's ``tests/lora/test_lora.py`` star-imports it).

One real vLLM server on the library's own directory with vLLM's LoRA (``--enable-lora``), the
kit's adapters (:data:`~vllm_factory.testing.gliner2.references.ADAPTERS`, made with gliner2's
``apply_lora`` and saved in PEFT's layout) given at start-up by name (``--lora-modules``);
a request picks one with vLLM's convention, ``"model": "<adapter name>"`` in the ``/pooling``
body, and the base model by the served model's own name; an adapter in gliner2's legacy layout
is converted by ``vllm-factory-prep`` first (made only for the encoders gliner2 loads it back
on, ``LEGACY_ENCODERS``; elsewhere its parity test is skipped, saying so). For the base and each adapter, every
case's scores are within the fp32 parity limit of gliner2's with ``load_adapter`` and its
results are gliner2's; requests of every adapter and the base sent together (vLLM batches
them: one step, several adapters, no merged weights) answer as each does alone; an
unknown name is refused naming it; an adapter loads and unloads at run time through vLLM's
``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``, or by name from a folder of
adapters (vLLM's filesystem resolver); an adapter that also targets a head
is refused when it loads, naming the modules.

Limits as the parity suite's (:mod:`~vllm_factory.testing.gliner2.parity`), from the library's
runs with the same adapter: in fp32 its fp32 noise (its float64 run, ``<name>-*-fp64``); in
bf16 (the GPU check) what bf16 costs the library itself (``<name>-*-bf16``), instance counts
and results differing no more often than in that run (x ``library_factor()``, + 1).
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.testing.fixtures import suite_names
from vllm_factory.testing.gliner2.parity import _limits, allowed_differences, same_result
from vllm_factory.testing.gliner2.references import ENCODED_ADAPTERS
from vllm_factory.testing.report import record

BASE = "base"
NAMES = (BASE, *ENCODED_ADAPTERS)
MAX_LORA_RANK = 8
# More concurrent requests than the 2-core server steps at once, so steps mix adapters.
CLIENTS = 12
# An adapter found by name in a folder of adapters (vLLM's filesystem resolver), not named at
# start-up: a copy of the kit's ``lora-b``.
FOLDER_ADAPTER, FOLDER_SOURCE = "found-in-folder", "lora-b"


@pytest.fixture(scope="session")
def lora_dir(gliner2_reference) -> Path:
    """The kit's adapters and gliner2's runs with them (``adapters_dir``)."""
    return gliner2_reference.adapters_dir()


def served_folder(lora_dir: Path, name: str, converted: Path) -> Path:
    """The folder the server reads for adapter ``name``: gliner2's as it is, or (the legacy
    layout) what ``vllm-factory-prep`` converts it to, under ``converted``."""
    from vllm_factory.heads.gliner.prep import main as prep
    from vllm_factory.models.gliner2.adapters import is_legacy_adapter

    if not is_legacy_adapter(lora_dir / name):
        return lora_dir / name
    assert prep(["--model", str(lora_dir / name), "--output", str(converted / name)]) == 0
    return converted / name


@pytest.fixture(scope="session")
def lora_server(reference_dir: Path, lora_dir: Path, tmp_path_factory):
    """A real vLLM server with LoRA on, the encoded adapters given at start-up (the legacy
    one converted first); run-time adapter updates allowed."""
    from vllm_factory.testing.gliner2.fixtures import CONFIG_FORMAT
    from vllm_factory.testing.server import VllmServer

    converted = tmp_path_factory.mktemp("converted-adapters")
    folder = tmp_path_factory.mktemp("adapter-folder")  # vLLM's filesystem resolver reads it
    served_as(lora_dir / FOLDER_SOURCE, folder / FOLDER_ADAPTER, reference_dir / "checkpoint")
    modules = [f"{name}={served_folder(lora_dir, name, converted)}" for name in made(lora_dir)]
    args = [*CONFIG_FORMAT, "--enable-lora", "--lora-modules", *modules,
            "--max-loras", str(len(modules)), "--max-lora-rank", str(MAX_LORA_RANK)]  # fmt: skip
    env = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_LORA_RESOLVER_CACHE_DIR": str(folder)}
    with VllmServer(reference_dir / "checkpoint", extra_args=args, env=env) as running:
        print(f"\nvLLM server (LoRA) healthy after {running.startup_seconds:.1f} s")
        yield running


def served_as(adapter: Path, out: Path, model: Path) -> None:
    """``adapter`` copied to ``out`` for vLLM's filesystem resolver, which takes an adapter
    whose ``base_model_name_or_path`` is the served model's name (here its path, as served):
    where the adapter was made, that names the checkpoint's folder on the machine that made
    it, as PEFT saves it."""
    shutil.copytree(adapter, out)
    config = json.loads((out / "adapter_config.json").read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = str(model)
    (out / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")


def made(lora_dir: Path) -> list[str]:
    """The encoded adapters made for this package's encoder (``lora-a-legacy`` only where
    gliner2 can load it back: ``LEGACY_ENCODERS``)."""
    return [name for name in ENCODED_ADAPTERS if (lora_dir / name).is_dir()]


def model_name(server, name: str) -> str:
    """The ``model`` field that picks ``name`` (the base: the served model's own name)."""
    return server.model if name == BASE else name


def post(server, name: str, case: dict) -> dict:
    data = {**case["request"], "text": case["text"], "return_scores": True}
    response = server.pooling(data, model=model_name(server, name))
    assert response.status_code == 200, (name, case["id"], response.text)
    return response.json()["data"]


def runs_of(name: str, reference_dir: Path, lora_dir: Path) -> tuple[Path, str]:
    """(folder, file prefix) of gliner2's runs for ``name``: ``<prefix>-results.json`` and
    ``<prefix>-scores.npz``, with ``-bf16`` / ``-fp64`` the same in those dtypes."""
    return (reference_dir, "ref") if name == BASE else (lora_dir, name)


def library(name: str, reference_dir: Path, lora_dir: Path) -> tuple:
    """gliner2's fp32 (results, scores) for ``name``."""
    folder, prefix = runs_of(name, reference_dir, lora_dir)
    data = np.load(folder / f"{prefix}-scores.npz")
    results = json.loads((folder / f"{prefix}-results.json").read_text(encoding="utf-8"))
    return results, {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def lora_limits(lora_server, reference_dir: Path, lora_dir: Path) -> dict[str, tuple]:
    """Per name made: the parity suite's limits at the server's dtype, and the library's own
    bf16 figures with the same adapter (None in fp32). Two requests of one name batched
    differently are held to the same limits."""
    out = {}
    for name in (BASE, *made(lora_dir)):
        results, scores = library(name, reference_dir, lora_dir)
        folder, prefix = runs_of(name, reference_dir, lora_dir)
        out[name] = _limits(lora_server, folder, results, scores, prefix)
    return out


@pytest.fixture(scope="session")
def lora_served(lora_server, cases, lora_dir: Path) -> dict[str, dict[str, dict]]:
    """Every case's response per name made, one request at a time."""
    names = (BASE, *made(lora_dir))
    return {name: {case["id"]: post(lora_server, name, case) for case in cases} for name in names}


def task_scores(got: dict, ref: dict, scores: dict, cid: str, where: str):
    """(served, library) score arrays of each task of one case; ``(None, None)`` for a span
    task whose served instance count is not the library's."""
    assert len(got["scores"]) == len(ref["tasks"]), where
    for index, (task, mine) in enumerate(zip(ref["tasks"], got["scores"])):
        if task["kind"] == "classifications":
            yield np.asarray(mine["probs"], np.float32), scores[f"{cid}/cls/{index}"]
            continue
        if mine["count"] != task["count"]:
            yield None, None
            continue
        key = f"{cid}/span/{index}"
        if key not in scores:
            assert mine["scores"] is None, (where, index)
            continue
        yield np.asarray(mine["scores"], np.float32), scores[key]


@pytest.mark.parametrize("name", NAMES)
def test_adapters_match_library(
    name, lora_served, lora_server, lora_limits, cases, reference_dir: Path, lora_dir: Path
):
    """Base and each adapter: counts equal, scores within the limit, results equal to
    gliner2's (``load_adapter`` in process for an adapter); below fp32, counts and results
    differ no more often than in the library's own run in that dtype."""
    if name not in lora_served:
        pytest.skip(f"{name}: gliner2 cannot load this layout back for this encoder")
    results, scores = library(name, reference_dir, lora_dir)
    limits, own = lora_limits[name]
    worst, values, count_flips, differing = 0.0, 0, 0, []
    for case in cases:
        cid = case["id"]
        got, ref = lora_served[name][cid], results[cid]
        for have, want in task_scores(got, ref, scores, cid, f"{name} {cid}"):
            if have is None:
                assert own is not None, (name, cid, "instance count differs")
                count_flips += 1
                continue
            assert have.shape == want.shape, (name, cid, have.shape, want.shape)
            diff = float(np.abs(have - want).max()) if want.size else 0.0
            assert diff <= limits.score, (name, cid, diff, limits.score)
            worst, values = max(worst, diff), values + want.size
        try:
            same_result(got["result"], ref["result"], limits.score, f"{name} {cid}")
        except AssertionError as error:
            if own is None:
                raise
            differing.append(str(error)[:300])
    if name != BASE:  # the adapter changes what the library extracts (the test is not vacuous)
        base, _ = library(BASE, reference_dir, lora_dir)
        changed = sum(results[c["id"]]["result"] != base[c["id"]]["result"] for c in cases)
        assert changed >= len(cases) // 2, (name, changed)
    record(lora_server.label, "parity", f"lora-{name}-{lora_server.dtype}", {
        "cases": len(cases), "values": values, "max_abs_diff": worst, "limit": limits.score,
        "count_flips": count_flips, "differing_cases": differing, "library_bf16": own,
    })  # fmt: skip
    print(f"\n{name} ({lora_server.dtype}): {values} scores, max |diff| {worst:.2e} (limit "
          f"{limits.score:.1e}); {count_flips} counts and {len(differing)} results differ")  # fmt: skip
    if own is not None:  # asserted once recorded
        assert count_flips <= allowed_differences(own["count_flips"]), (count_flips, own)
        assert len(differing) <= allowed_differences(own["result_flips"]), (differing[:3], own)


def steps(server) -> float:
    """How many model steps the server has run (vLLM's ``iteration_tokens_total`` count)."""
    return sum(server.metric("vllm:iteration_tokens_total_count").values())


def test_mixed_requests_answer_as_alone(lora_served, lora_server, lora_limits, cases):
    """Every case under the base and every adapter, all sent together, interleaved by name
    (base, a, b, base, ...; the clients keep about as many of each in flight): each answer is
    the one the same request got alone, scores within its name's limit; and the server ran fewer
    steps than requests, so some steps held several requests (how many varies with the
    machine's load). Below fp32 a request batched with others rounds differently: per name, as
    many answers may differ (result, instance counts or scores) as the parity bound allows
    the library's own run in that dtype (``library_factor()`` x its differing results and
    counts, + 1)."""
    jobs = [(name, case) for case in cases for name in lora_served]
    before = steps(lora_server)
    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(lambda job: post(lora_server, *job), jobs))
    ran = steps(lora_server) - before
    differing: dict[str, list[str]] = {name: [] for name in lora_served}
    for (name, case), got in zip(jobs, answers):
        (limits, own), alone = lora_limits[name], lora_served[name][case["id"]]
        try:
            same_result(got, alone, limits.score, f"{name} {case['id']}")
        except AssertionError as error:
            if own is None:
                raise
            differing[name].append(str(error)[:200])
    assert ran < len(jobs), (ran, len(jobs))
    print(f"\n{len(jobs)} requests by {CLIENTS} clients in {ran:.0f} steps; answers differing "
          f"from alone: {({n: len(d) for n, d in differing.items()})}")  # fmt: skip
    for name, found in differing.items():
        own = lora_limits[name][1]
        if own is not None:
            allowed = allowed_differences(own["result_flips"] + own["count_flips"])
            assert len(found) <= allowed, (name, len(found), own, found[:3])


def test_unknown_adapter_refused(lora_server, cases):
    """A ``model`` that names no adapter (and is not the base) is a 404 naming it."""
    response = lora_server.pooling(
        {**cases[0]["request"], "text": cases[0]["text"]}, model="no-such-adapter"
    )
    assert response.status_code == 404, response.text
    message = response.json()["error"]["message"]
    assert "model" in message and "no-such-adapter" in message, message


def test_runtime_load_and_unload(lora_server, lora_served, lora_limits, cases, lora_dir: Path):
    """``/v1/load_lora_adapter`` serves an adapter under a new name (the same answers as at
    start-up); ``/v1/unload_lora_adapter`` removes it (then a 404)."""
    name, live = ENCODED_ADAPTERS[1], "loaded-at-run-time"  # a PEFT folder, as saved
    loaded = lora_server.post(
        "/v1/load_lora_adapter", {"lora_name": live, "lora_path": str(lora_dir / name)}
    )
    assert loaded.status_code == 200, loaded.text
    for case in cases[:8]:
        got = post(lora_server, live, case)
        same_result(got, lora_served[name][case["id"]], lora_limits[name][0].score, case["id"])
    unloaded = lora_server.post("/v1/unload_lora_adapter", {"lora_name": live})
    assert unloaded.status_code == 200, unloaded.text
    data = {**cases[0]["request"], "text": cases[0]["text"]}
    assert lora_server.pooling(data, model=live).status_code == 404


def test_adapter_found_in_folder(lora_server, lora_served, lora_limits, cases):
    """With ``VLLM_LORA_RESOLVER_CACHE_DIR`` (and run-time updates allowed), a ``model`` that
    names a sub-folder of that folder loads it on first use (vLLM's filesystem resolver; the
    adapter's ``base_model_name_or_path`` is the served model's name): the answers of the
    adapter it holds."""
    for case in cases[:8]:
        got = post(lora_server, FOLDER_ADAPTER, case)
        alone = lora_served[FOLDER_SOURCE][case["id"]]
        same_result(got, alone, lora_limits[FOLDER_SOURCE][0].score, case["id"])


def test_adapter_heads_refused(lora_server, lora_dir: Path, cases):
    """An adapter that also targets a head (``classifier``, a plain torch layer of ours) is
    refused when it loads, naming the modules vLLM's LoRA can wrap and the ones it got (vLLM
    answers the failed load with a 500); the server goes on serving."""
    response = lora_server.post(
        "/v1/load_lora_adapter", {"lora_name": "heads", "lora_path": str(lora_dir / "lora-heads")}
    )
    assert response.status_code == 500, response.text
    message = response.json()["error"]["message"]
    assert "expected target modules" in message and "classifier.0" in message, message
    data = {**cases[0]["request"], "text": cases[0]["text"]}
    assert lora_server.pooling(data, model="heads").status_code == 404
    assert lora_server.pooling(data, model=ENCODED_ADAPTERS[0]).status_code == 200


__all__ = [*suite_names(globals())]  # noqa: PLE0604
