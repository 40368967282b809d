"""Several models behind one endpoint: a GLiNER, a ColBERT and an embedder served by real vLLM
servers, LiteLLM's proxy in front (``router/litellm.yaml``), one path prefix per model.
Requests through the router are answered as the server answers them directly, errors included
(status and body); a killed server gets a prompt error through the router while the others
keep serving."""

from __future__ import annotations

import math
import os
import signal
import time
from typing import Any

import httpx
from vllm_factory.testing.usage import is_running, process_tree

# The engine is not bitwise repeatable between requests (~1e-6 on CPU): numbers compare within
# this, everything else exactly. Ids and timestamps name one answer, not its content.
RTOL, ATOL = 1e-4, 1e-5
PER_ANSWER = {"id", "created", "created_at", "request_id"}

NER = {
    "text": "Ada Lovelace worked with Charles Babbage in London in 1843.",
    "labels": ["person", "location", "date"],
    "threshold": 0.05,
}
QUERY = "how are late interaction scores computed"
DOCUMENTS = ["MaxSim sums the best match of every query token.", "Croissants every morning."]
TEXTS = ["A bidirectional encoder.", "Short one."]

REQUESTS = {
    "gliner": [("/pooling", {"data": NER}), ("/pooling", {"data": {**NER, "text": [NER["text"]]}})],
    "colbert": [
        ("/pooling", {"data": {"text": QUERY, "is_query": True}}),
        ("/pooling", {"data": {"text": DOCUMENTS, "is_query": False}}),
        ("/score", {"text_1": QUERY, "text_2": DOCUMENTS}),
        ("/rerank", {"query": QUERY, "documents": DOCUMENTS}),
    ],
    "embedder": [
        ("/pooling", {"data": {"text": TEXTS, "prompt_name": "query"}}),
        ("/v1/embeddings", {"input": TEXTS}),
    ],
}


def assert_same(routed: Any, direct: Any, where: str = "") -> None:
    """``routed`` is ``direct``: the same structure and values, numbers within RTOL/ATOL."""
    if isinstance(direct, dict):
        assert isinstance(routed, dict), where
        assert routed.keys() == direct.keys(), (where, routed.keys(), direct.keys())
        for key in direct.keys() - (PER_ANSWER if not where else set()):
            assert_same(routed[key], direct[key], f"{where}.{key}")
    elif isinstance(direct, list):
        assert isinstance(routed, list) and len(routed) == len(direct), where
        for i, (a, b) in enumerate(zip(routed, direct)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(direct, float) and not isinstance(routed, bool):
        assert isinstance(routed, (int, float)), where
        assert math.isclose(routed, direct, rel_tol=RTOL, abs_tol=ATOL), (where, routed, direct)
    else:
        assert routed == direct, (where, routed, direct)


def through_router(router, model: str, path: str, body: dict) -> httpx.Response:
    """``path`` of ``model``'s server, through the router's prefix for it."""
    return router.post(f"/{model}{path}", {"model": model, **body})


def check_model(router, backends, model: str) -> None:
    server = backends[model].server
    for path, body in REQUESTS[model]:
        direct = server.post(path, {"model": model, **body})
        assert direct.status_code == 200, (path, direct.text)
        routed = through_router(router, model, path, body)
        assert routed.status_code == 200, (path, routed.text)
        assert_same(routed.json(), direct.json())


def test_router_lists_the_three_models(router):
    response = httpx.get(
        f"{router.url}/v1/models", headers={"Authorization": f"Bearer {router.key}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    assert {item["id"] for item in response.json()["data"]} == {"gliner", "colbert", "embedder"}


def test_gliner_through_router_equals_direct(router, backends):
    check_model(router, backends, "gliner")


def test_colbert_through_router_equals_direct(router, backends):
    check_model(router, backends, "colbert")


def test_embedder_through_router_equals_direct(router, backends):
    check_model(router, backends, "embedder")


def check_same_error(routed: httpx.Response, direct: httpx.Response, field: str) -> None:
    """The server refused the request with a 4xx naming ``field``, and the router relays that
    refusal as it is: the status and the body."""
    assert 400 <= direct.status_code < 500, direct.text
    assert field in direct.json()["error"]["message"], direct.text
    assert routed.status_code == direct.status_code, routed.text
    assert routed.headers["content-type"] == direct.headers["content-type"]
    assert routed.json() == direct.json()
    print(f"refused through the router: HTTP {routed.status_code}: {routed.text}")


def test_bad_request_gets_the_servers_status_and_message(router, backends):
    """A GLiNER request with an out-of-range threshold: the client gets the server's 4xx naming
    data.threshold through the router, not a 5xx."""
    body = {"data": {**NER, "threshold": 7.0}}
    direct = backends["gliner"].server.post("/pooling", {"model": "gliner", **body})
    routed = through_router(router, "gliner", "/pooling", body)
    check_same_error(routed, direct, "threshold")


def test_request_goes_to_the_server_of_its_prefix(router, backends):
    """A GLiNER body sent to the embedder's prefix is the embedder server's to answer: it
    refuses it with its own 4xx naming data.labels, relayed as it is."""
    direct = backends["embedder"].server.post("/pooling", {"model": "embedder", "data": NER})
    routed = through_router(router, "embedder", "/pooling", {"data": NER})
    check_same_error(routed, direct, "data.labels")


def test_unknown_model_is_a_404(router, backends):
    """No prefix for the model: the router's 404. A prefix whose server does not serve the
    body's "model": that server's 404, relayed."""
    started = time.monotonic()
    routed = router.post("/no-such-model/pooling", {"model": "no-such-model", "data": NER})
    assert routed.status_code == 404, routed.text
    assert time.monotonic() - started < 10

    body = {"model": "no-such-model", "data": NER}
    direct = backends["gliner"].server.post("/pooling", body)
    assert direct.status_code == 404, direct.text
    routed = router.post("/gliner/pooling", body)
    assert routed.status_code == 404, routed.text
    assert routed.json() == direct.json()


def test_request_without_key_is_a_401(router):
    response = httpx.post(f"{router.url}/gliner/pooling", json={"model": "gliner", "data": NER},
                          timeout=10)  # fmt: skip
    assert response.status_code == 401, response.text
    assert response.json()["error"]["type"] == "auth_error"


def test_body_routed_vllm_route_loses_the_servers_status(router, backends):
    """Why the config routes by path: LiteLLM's body-routed `/vllm/<path>` forwards a good
    request as the server answers it, but answers the server's 4xx with a 500 of its own (the
    server's message only in the router's log). docs/deploy.md states it; if a LiteLLM
    version relays the status, this fails and the docs change with it."""
    good = router.post("/vllm/pooling", {"model": "gliner", "data": NER})
    assert good.status_code == 200, good.text
    assert_same(good.json(), through_router(router, "gliner", "/pooling", {"data": NER}).json())
    bad = router.post("/vllm/pooling", {"model": "gliner", "data": {**NER, "threshold": 7.0}})
    assert bad.status_code == 500, bad.text
    assert "threshold" not in bad.text
    unknown = router.post("/vllm/pooling", {"model": "no-such-model", "data": NER})
    assert unknown.status_code == 500, unknown.text


def test_killed_server_is_an_error_and_the_others_keep_serving(router, backends):
    """Kill the ColBERT server (its processes, by PID): its prefix is answered with an error
    naming the failed connection at once, not a hang; the GLiNER and the embedder answer as
    before."""
    before = {
        model: through_router(router, model, *REQUESTS[model][0]).json()
        for model in ("gliner", "embedder")
    }
    victim = backends["colbert"].server
    tree = process_tree(victim.process.pid)
    for pid in tree:
        os.kill(pid, signal.SIGKILL)
    victim.process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(is_running(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(is_running(pid) for pid in tree)

    for _ in range(3):
        started = time.monotonic()
        routed = through_router(router, "colbert", *REQUESTS["colbert"][0])
        elapsed = time.monotonic() - started
        # LiteLLM answers a refused connection with a 500 whose message names it (not 502)
        assert routed.status_code >= 500, routed.text
        assert "connect" in routed.json()["error"]["message"].lower(), routed.text
        assert elapsed < 10, elapsed
        print(f"killed backend: HTTP {routed.status_code} after {elapsed:.1f} s: {routed.text}")

    for model, answer in before.items():
        routed = through_router(router, model, *REQUESTS[model][0])
        assert routed.status_code == 200, routed.text
        assert_same(routed.json(), answer)
    check_model(router, backends, "gliner")
    check_model(router, backends, "embedder")
