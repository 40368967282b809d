"""Per-request LoRA adapters, served vs the gliner library with the same PEFT adapter (the
family's LoRA suite; a package's ``tests/lora/test_lora.py`` star-imports it).

One real vLLM server on the prepared checkpoint with vLLM's LoRA (``--enable-lora``), the
kit's adapters (:data:`~vllm_factory.testing.gliner.references.ADAPTERS`: PEFT's LoRA on
gliner's encoder module, the format gliner.serve's PolyLoRA loads, or on gliner's whole model)
given at start-up by name (``--lora-modules``); a request picks one with vLLM's convention,
``"model": "<adapter name>"`` in the ``/pooling`` body, and the base model by the served
model's own name. For the base and each adapter, every span x label score of the corpus is
within the parity limit of gliner's with the adapter applied in process, and the entity lists
are gliner's (by the parity suite's rules for scores near a threshold or near ties); requests
of every adapter and the base sent together (vLLM batches them: one step, several adapters, no
merged weights) answer as each does alone; an unknown name is refused naming it; an adapter loads and unloads
at run time through vLLM's ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``; an
adapter that also targets a head layer is refused when it loads, naming the modules.

Limits as the parity suite's (:mod:`~vllm_factory.testing.gliner.parity`): fp32 to float noise;
in bf16 (the GPU check) what bf16 costs gliner itself with the same adapter (its bf16 run,
``<name>-scores-bf16.npz``), entity lists left out where a score flips side of the threshold
no more often than gliner's own bf16 run flips one (x ``library_factor()``).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from vllm_factory.testing.fixtures import suite_names
from vllm_factory.testing.gliner.parity import (
    AS_GLINER,
    MODES,
    _case,
    _key,
    _library_run,
    _limits,
    _near_threshold,
    _near_tie,
    _same_side,
)
from vllm_factory.testing.gliner.references import ENCODED_ADAPTERS, LORA_THRESHOLDS
from vllm_factory.testing.parity import library_factor
from vllm_factory.testing.report import record

BASE = "base"
NAMES = (BASE, *ENCODED_ADAPTERS)
MAX_LORA_RANK = 8
# The mixed-batch check: one request per text (the first MIXED_TEXTS), label set and name,
# from more concurrent clients than the 2-core server steps at once, so steps mix adapters.
MIXED_TEXTS = 16
CLIENTS = 24


@pytest.fixture(scope="session")
def lora_dir(gliner_reference) -> Path:
    """The kit's adapters and gliner's runs with them (``adapters_dir``)."""
    return gliner_reference.adapters_dir()


@pytest.fixture(scope="session")
def lora_server(served_dir: Path, request: pytest.FixtureRequest):
    """A real vLLM server with LoRA on, the encoded adapters given at start-up; run-time
    adapter updates allowed."""
    from vllm_factory.testing.server import VllmServer

    lora_dir = request.getfixturevalue("lora_dir")
    modules = [f"{name}={lora_dir / name}" for name in ENCODED_ADAPTERS]
    args = ["--enable-lora", "--lora-modules", *modules, "--max-loras", str(len(modules)),
            "--max-lora-rank", str(MAX_LORA_RANK)]  # fmt: skip
    env = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    with VllmServer(served_dir, extra_args=args, env=env) as running:
        print(f"\nvLLM server (LoRA) healthy after {running.startup_seconds:.1f} s")
        yield running


def model_name(server, name: str) -> str:
    """The ``model`` field that picks ``name`` (the base: the served model's own name)."""
    return server.model if name == BASE else name


def post(server, name: str, data: dict) -> list:
    response = server.pooling(data, model=model_name(server, name))
    assert response.status_code == 200, (name, response.text)
    return response.json()["data"]


def library(name: str, reference_dir: Path, lora_dir: Path) -> tuple[dict, dict]:
    """gliner's (entity lists, score arrays) for ``name``."""
    if name == BASE:
        entities, scores = reference_dir / "ref-entities.json", reference_dir / "ref-scores.npz"
    else:
        entities, scores = lora_dir / f"{name}-entities.json", lora_dir / f"{name}-scores.npz"
    data = np.load(scores)
    return json.loads(entities.read_text(encoding="utf-8")), {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def lora_limits(lora_server, reference_dir: Path, lora_dir: Path) -> dict[str, tuple]:
    """Per name: the parity suite's limits at the server's dtype, and gliner's own run in that
    dtype with the same adapter (None in fp32). Two requests of one name batched differently
    are held to the same limits."""
    out = {}
    for name in NAMES:
        _, scores = library(name, reference_dir, lora_dir)
        own = _library_run(
            lora_server,
            reference_dir,
            scores,
            None if name == BASE else (lora_dir / f"{name}-scores-bf16.npz"),
        )  # the base's: the parity reference's
        out[name] = (_limits(lora_server, own), own)
    return out


@pytest.fixture(scope="session")
def lora_served(lora_server, corpus) -> dict[str, dict]:
    """Per name: the corpus's score tensors per label set and its entity lists per label set,
    decoding mode and threshold of :data:`LORA_THRESHOLDS` (one request per label set and
    setting, all texts)."""
    served: dict[str, dict] = {}
    for name in NAMES:
        out: dict = {}
        for set_name, labels in corpus["label_sets"].items():
            data = {"text": corpus["texts"], "labels": labels, **AS_GLINER}
            items = post(lora_server, name, {**data, "return_scores": True})
            out[f"scores_{set_name}"] = [np.asarray(i["scores"], np.float32) for i in items]
            for mode, kwargs in MODES.items():
                for threshold in LORA_THRESHOLDS:
                    request = {**data, **kwargs, "threshold": threshold}
                    out[f"{set_name}/{mode}/{threshold}"] = post(lora_server, name, request)
        served[name] = out
    return served


@pytest.mark.parametrize("name", NAMES)
def test_adapters_match_gliner(
    name, lora_served, lora_server, lora_limits, corpus, reference_dir: Path, lora_dir: Path
):
    """Base and each adapter: every score tensor within the limit of gliner's (with the
    adapter applied in process), and the entity lists gliner's wherever the parity suite
    compares them (a score near the threshold on the other side, or two overlapping
    candidates tied within the dtype's noise, leaves a list out; in fp32 at least 90% are
    compared, below it sides flip no more often than in gliner's own run in that dtype)."""
    entities, scores = library(name, reference_dir, lora_dir)
    (limits, own), served = lora_limits[name], lora_served[name]
    worst = 0.0
    for set_name in corpus["label_sets"]:
        for i in range(len(corpus["texts"])):
            ref, got = scores[f"scores_{set_name}_{i}"], served[f"scores_{set_name}"][i]
            assert got.shape == ref.shape, (name, set_name, i, got.shape, ref.shape)
            diff = float(np.abs(got - ref).max())
            assert diff <= limits.score, (name, set_name, i, diff)
            worst = max(worst, diff)
    compared = flipped = ties = listed = own_flips = 0
    for set_name in corpus["label_sets"]:
        for mode in MODES:
            for threshold in LORA_THRESHOLDS:
                key = f"{set_name}/{mode}/{threshold}"
                for i, (got, want) in enumerate(zip(served[key], entities[key], strict=True)):
                    ref, n_words, own_flip = _case(scores, own, set_name, i, threshold)
                    own_flips += own_flip
                    mine = served[f"scores_{set_name}"][i]
                    if _near_threshold(ref, n_words, threshold, limits.margin) and not (
                        _same_side(mine, ref, n_words, threshold)
                    ):
                        flipped += 1
                        continue
                    if _key(got) != _key(want) and _near_tie(ref, n_words, threshold, limits):
                        ties += 1
                        continue
                    assert _key(got) == _key(want), (name, key, i)
                    for a, b in zip(got, want):
                        assert abs(a["score"] - b["score"]) <= limits.score, (name, key, i)
                    compared, listed = compared + 1, listed + len(want)
    total = compared + flipped + ties
    if own is None:
        assert compared >= 0.9 * total, (name, compared, flipped, ties)
    else:
        assert flipped <= max(0.1 * total, library_factor() * own_flips), (name, flipped, own_flips)
    if name != BASE:  # the adapter changes what gliner extracts (the test is not vacuous)
        base, _ = library(BASE, reference_dir, lora_dir)
        keys = [k for k in entities if k.count("/") == 2 and "input_spans" not in k]
        changed = sum(a != b for k in keys for a, b in zip(base[k], entities[k]))
        total = sum(len(base[k]) for k in keys)
        assert changed >= total // 2, (name, changed, total)
    record(lora_server.label.removesuffix("_io"), "parity", f"lora-{name}-{lora_server.dtype}", {
        "max_abs_diff": worst, "limit": limits.score, "entity_lists": compared,
        "entities": listed, "flipped": flipped, "near_ties": ties,
        "library_bf16_max_abs_diff": own and own["max_abs_diff"],
        "library_bf16_flips": own_flips if own else None,
    })  # fmt: skip
    print(f"\n{name} ({lora_server.dtype}): max |diff| {worst:.2e} (limit {limits.score:.1e}); "
          f"{compared} entity lists identical ({listed} entities), {flipped} left out on a "
          f"flipped side, {ties} on near ties")  # fmt: skip


def steps(server) -> float:
    """How many model steps the server has run (vLLM's ``iteration_tokens_total`` count)."""
    return sum(server.metric("vllm:iteration_tokens_total_count").values())


def test_mixed_requests_answer_as_alone(lora_served, lora_server, lora_limits, corpus):
    """Single-text requests (the first texts, every label set) under the base and every
    adapter, all sent together, interleaved by name: each answer's scores are within its
    name's limit (:func:`lora_limits`) of the same text's alone (in its name's own request), and the server
    ran fewer steps than requests, so some steps held several adapters' requests."""
    jobs = [(name, set_name, i) for set_name in corpus["label_sets"]
            for i in range(MIXED_TEXTS) for name in NAMES]  # fmt: skip

    def send(job):
        name, set_name, i = job
        data = {"text": [corpus["texts"][i]], "labels": corpus["label_sets"][set_name],
                "return_scores": True, **AS_GLINER}  # fmt: skip
        return post(lora_server, name, data)[0]

    before = steps(lora_server)
    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(send, jobs))
    ran = steps(lora_server) - before
    for (name, set_name, i), got in zip(jobs, answers):
        alone = lora_served[name][f"scores_{set_name}"][i]
        diff = float(np.abs(np.asarray(got["scores"], np.float32) - alone).max())
        assert diff <= lora_limits[name][0].score, (name, set_name, i, diff)
    assert ran < len(jobs), (ran, len(jobs))
    print(f"\n{len(jobs)} requests by {CLIENTS} clients in {ran:.0f} steps")


def test_unknown_adapter_refused(lora_server, corpus):
    """A ``model`` that names no adapter (and is not the base) is a 404 naming it."""
    data = {"text": corpus["texts"][0], "labels": corpus["label_sets"]["5"]}
    response = lora_server.pooling(data, model="no-such-adapter")
    assert response.status_code == 404, response.text
    message = response.json()["error"]["message"]
    assert "no-such-adapter" in message, message


def test_runtime_load_and_unload(lora_server, lora_served, lora_limits, corpus, lora_dir: Path):
    """``/v1/load_lora_adapter`` serves an adapter under a new name (the same scores as at
    start-up); ``/v1/unload_lora_adapter`` removes it (then a 404)."""
    name, live = ENCODED_ADAPTERS[1], "loaded-at-run-time"
    loaded = lora_server.post(
        "/v1/load_lora_adapter", {"lora_name": live, "lora_path": str(lora_dir / name)}
    )
    assert loaded.status_code == 200, loaded.text
    labels, limit = corpus["label_sets"]["5"], lora_limits[name][0].score
    data = {"text": corpus["texts"], "labels": labels, "return_scores": True, **AS_GLINER}
    for i, item in enumerate(post(lora_server, live, data)):
        diff = float(
            np.abs(np.asarray(item["scores"], np.float32) - lora_served[name]["scores_5"][i]).max()
        )
        assert diff <= limit, (i, diff)
    unloaded = lora_server.post("/v1/unload_lora_adapter", {"lora_name": live})
    assert unloaded.status_code == 200, unloaded.text
    assert (
        lora_server.pooling({"text": corpus["texts"][0], "labels": labels}, model=live).status_code
        == 404
    )


def test_adapter_heads_refused(lora_server, lora_dir: Path, corpus):
    """An adapter that also targets a head layer (``prompt_rep_layer.0``, a plain torch layer of
    ours) is refused when it loads, naming the modules vLLM's LoRA can wrap and the ones it
    got (vLLM answers the failed load with a 500); the server goes on serving."""
    response = lora_server.post(
        "/v1/load_lora_adapter", {"lora_name": "heads", "lora_path": str(lora_dir / "lora-heads")}
    )
    assert response.status_code == 500, response.text
    message = response.json()["error"]["message"]
    assert "expected target modules" in message and "prompt_rep_layer.0" in message, message
    data = {"text": corpus["texts"][0], "labels": corpus["label_sets"]["5"]}
    assert lora_server.pooling(data, model="heads").status_code == 404
    assert lora_server.pooling(data, model=ENCODED_ADAPTERS[0]).status_code == 200


__all__ = [*suite_names(globals())]  # noqa: PLE0604
