"""Past one host: vLLM's multi-node data parallel serving a GLiNER and a ColBERT with their
plugins unchanged, in the form that runs on one machine: per model a head (``vllm serve`` with
DP rank 0 and the API server) and a ``--headless`` "node" with DP rank 1 on 127.0.0.1,
launched as two hosts launch them (``--data-parallel-size 2 --data-parallel-size-local 1``,
the node with ``--data-parallel-start-rank 1``, both on the head's ``--data-parallel-address``
and ``--data-parallel-rpc-port``). Each head's answers equal a single server's (errors
included), each node runs its engine in its own process tree, and concurrent requests are
spread over both engines (the head's per-engine metrics). Losing the node is asserted as vLLM
behaves: the head stays healthy and the requests it gives the lost engine go unanswered."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
from conftest import colbert_server, gliner_server
from dataparallel import (
    HEAD_ENGINE,
    NODE_ENGINE,
    Group,
    device_env,
    finished_per_engine,
    group,
    process_titles,
)
from test_router import NER, REQUESTS, assert_same
from vllm_factory.testing.server import VllmServer, reserve_port
from vllm_factory.testing.usage import is_running, process_tree

MODELS = ("gliner", "colbert")


class Deployment(NamedTuple):
    single: VllmServer
    group: Group

    @property
    def head(self) -> VllmServer:
        return self.group.head

    @property
    def node(self) -> VllmServer:
        return self.group.node


def builder(name: str, tmp: Path):
    """``build(server_class, **kwargs)`` for :func:`dataparallel.group`: ``name``'s server."""

    def build(server: type[VllmServer], **kwargs) -> VllmServer:
        if name == "gliner":
            # each server its own prepared copy (prep writes into an empty folder)
            return gliner_server(tmp / server.__name__, server, **kwargs)
        return colbert_server(server, **kwargs)

    return build


@pytest.fixture(scope="module")
def deployments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Deployment]]:
    """Per model its single server and its head and node, all started side by side."""
    tmp = tmp_path_factory.mktemp("dp")
    rpc = {name: reserve_port() for name in MODELS}  # each group's handshake port
    groups = {}
    for name in MODELS:
        build = builder(name, tmp)
        groups[name] = Deployment(
            build(VllmServer, env=device_env(0)), group(build, rpc[name].port)
        )
    with ExitStack() as stack:
        for lease in rpc.values():
            stack.callback(lease.release)
        for deployment in groups.values():
            stack.callback(deployment.single.stop)
            stack.callback(deployment.group.stop)
        started = time.monotonic()
        with ThreadPoolExecutor(2 * len(groups)) as pool:
            jobs = [pool.submit(deployment.single.start) for deployment in groups.values()]
            jobs += [pool.submit(deployment.group.start) for deployment in groups.values()]
            for job in jobs:
                job.result()
        print(f"\n{len(groups)} single servers and {len(groups)} two-engine groups healthy "
              f"after {time.monotonic() - started:.1f} s")  # fmt: skip
        yield groups


@pytest.mark.parametrize("model", MODELS)
def test_each_engine_runs_in_its_own_host_process(deployments, model):
    """The head's processes hold engine 0 and only it, the node's engine 1 (their process
    titles and logs); the head's metrics name both engines."""
    deployment = deployments[model]
    head, node = (
        process_titles(deployment.head.process.pid),
        process_titles(deployment.node.process.pid),
    )
    assert any(HEAD_ENGINE in title for title in head), head
    assert not any(NODE_ENGINE in title for title in head), head
    assert any(NODE_ENGINE in title for title in node), node
    assert not any(HEAD_ENGINE in title for title in node), node
    head_log = deployment.head.log_path.read_text(errors="replace")
    node_log = deployment.node.log_path.read_text(errors="replace")
    assert HEAD_ENGINE in head_log and NODE_ENGINE not in head_log, deployment.head.log_tail()
    assert NODE_ENGINE in node_log and HEAD_ENGINE not in node_log, deployment.node.log_tail()
    assert set(finished_per_engine(deployment.head, model)) == {"0", "1"}


@pytest.mark.parametrize("model", MODELS)
def test_data_parallel_answers_equal_a_single_server(deployments, model):
    """Every request of the router test (GLiNER ``/pooling``; ColBERT ``/pooling``, ``/score``,
    ``/rerank``), sent twice so that both engines are likely to answer one: what the single
    server answers."""
    deployment = deployments[model]
    for path, body in REQUESTS[model]:
        direct = deployment.single.post(path, {"model": model, **body})
        assert direct.status_code == 200, (path, direct.text)
        for _ in range(2):
            spread = deployment.head.post(path, {"model": model, **body})
            assert spread.status_code == 200, (path, spread.text)
            assert_same(spread.json(), direct.json())


def test_data_parallel_refuses_as_a_single_server(deployments):
    """A GLiNER request with an out-of-range threshold: the head answers the single server's
    4xx, same status, same body."""
    body = {"model": "gliner", "data": {**NER, "threshold": 7.0}}
    direct = deployments["gliner"].single.post("/pooling", body)
    spread = deployments["gliner"].head.post("/pooling", body)
    assert 400 <= direct.status_code < 500, direct.text
    assert "threshold" in direct.json()["error"]["message"]
    assert spread.status_code == direct.status_code, spread.text
    assert spread.json() == direct.json()


@pytest.mark.parametrize("model", MODELS)
def test_concurrent_requests_spread_over_both_engines(deployments, model):
    """32 ``/pooling`` requests, 8 at a time, to the head: every one answered as the single
    server answers it, each counted once by the head's metrics, and both engines (the head's
    and the node's) finished some."""
    deployment = deployments[model]
    path, body = REQUESTS[model][0]
    expected = deployment.single.post(path, {"model": model, **body})
    assert expected.status_code == 200, expected.text
    before = finished_per_engine(deployment.head, model)
    count = 32
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: deployment.head.post(path, {"model": model, **body}),
                                range(count)))  # fmt: skip
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert_same(answer.json(), expected.json())
    after = finished_per_engine(deployment.head, model)
    served = {engine: after[engine] - before.get(engine, 0) for engine in after}
    print(f"{model}: {count} concurrent requests finished per engine: {served}")
    assert sum(served.values()) == count, served
    assert served["0"] > 0 and served["1"] > 0, served


def test_lost_node_leaves_the_head_healthy_and_its_requests_unanswered(deployments):
    """What losing a host does (vLLM 0.32; docs/deploy.md states it): kill the ColBERT
    node's processes (by PID): the head's ``/health`` stays 200 and its metrics still list
    engine 1; of concurrent requests, those the head sends to the lost engine get no answer
    (here: none within 10 s, where an answer takes well under a second), the others are
    answered as before. Runs last: the group is not whole afterwards."""
    deployment = deployments["colbert"]
    path, body = REQUESTS["colbert"][0]
    expected = deployment.single.post(path, {"model": "colbert", **body}).json()
    tree = process_tree(deployment.node.process.pid)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deployment.node.process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(is_running(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(is_running(pid) for pid in tree)

    def attempt(_: int) -> httpx.Response | None:
        try:
            return deployment.head.post(path, {"model": "colbert", **body}, timeout=10)
        except httpx.TimeoutException:
            return None

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(attempt, range(8)))
    answered = [answer for answer in answers if answer is not None]
    print(f"lost node: {len(answered)} of {len(answers)} concurrent requests answered, "
          f"{len(answers) - len(answered)} unanswered after 10 s")  # fmt: skip
    for answer in answered:
        assert answer.status_code == 200, answer.text
        assert_same(answer.json(), expected)
    assert len(answered) < len(answers)
    assert httpx.get(f"{deployment.head.url}/health", timeout=10).status_code == 200
    assert set(finished_per_engine(deployment.head, "colbert")) == {"0", "1"}
