"""Figures of vLLM's multi-node data parallel against one server, on one machine: per model
(the tiny GLiNER and ColBERT checkpoints of ``tests/test_data_parallel.py``), one server on
the first device, then a head (DP rank 0, first device) and a ``--headless`` node (DP rank 1,
second GPU where there are two) as two hosts run them; closed-loop ``/pooling`` load at each
client count, requests per second, latencies and how many requests each engine finished.

Run from the repository root in the tests' venv (vLLM and the workspace packages installed)::

    python packages/deploy/dp_bench.py --concurrency 1,16,64 --seconds 10 --out dp.json

Servers take the test servers' settings (``VLLM_FACTORY_TEST_DTYPE``, ``_EAGER``,
``_SERVER_ARGS``: see ``vllm_factory.testing.server``). One after the other: the single server
is stopped before its model's group starts.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent / "tests"
sys.path.insert(0, str(TESTS))

logger = logging.getLogger("dp_bench")


def body_maker(model: str):
    """``make_body(i)``: the model's first test request with its text numbered."""
    from test_router import REQUESTS

    path, base = REQUESTS[model][0]
    assert path == "/pooling", path

    def make_body(i: int) -> dict:
        body = copy.deepcopy(base)
        body["data"]["text"] = f"{body['data']['text']} ({i})"
        return {"model": model, **body}

    return make_body


def measure(server: Any, model: str, clients: list[int], seconds: float, processes: int):
    """Closed-loop points against ``server``'s ``/pooling``, with the head's per-engine counts
    where ``server`` heads a group."""
    from dataparallel import Head, finished_per_engine
    from vllm_factory.testing.loadgen import Workload, closed_loop, closed_loop_processes

    points = []
    for count in clients:
        work = Workload(
            url=f"{server.url}/pooling",
            make_body=body_maker(model),
            requests=max(2 * count, 32),
            warmup=count,
            min_seconds=seconds,
            timeout=120.0,
        )
        before = finished_per_engine(server, model) if isinstance(server, Head) else {}
        if processes > 1:
            point = closed_loop_processes(work, count, min(processes, count))
        else:
            point = asyncio.run(closed_loop(work, count))
        figures = point.to_dict()
        if isinstance(server, Head):
            after = finished_per_engine(server, model)
            figures["finished_per_engine"] = {k: after[k] - before.get(k, 0) for k in after}
        logger.info("%s %s clients=%d: %.1f req/s", model, server.label, count, point.req_per_s)
        points.append(figures)
    return points


def device_names() -> list[str]:
    from dataparallel import gpus

    devices = gpus()
    if not devices:
        return [f"cpu ({platform.processor() or platform.machine()})"]
    import torch

    return [torch.cuda.get_device_name(i) for i in range(len(devices))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from conftest import colbert_server, gliner_server
    from dataparallel import device_env, group
    from vllm_factory.testing.server import VllmServer, reserve_port

    parser = argparse.ArgumentParser(prog="dp_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gliner,colbert")
    parser.add_argument("--concurrency", default="1,8,32", help="comma list of client counts")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds a point")
    parser.add_argument("--client-processes", type=int, default=1)
    parser.add_argument("--out", type=Path, help="JSON results file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    clients = [int(c) for c in args.concurrency.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="dp-bench-"))
    results: dict[str, Any] = {"devices": device_names(), "runs": []}

    for model in args.models.split(","):

        def build(server: type[VllmServer], model: str = model, **kwargs) -> VllmServer:
            if model == "gliner":
                return gliner_server(tmp / f"{model}-{server.__name__}", server, **kwargs)
            return colbert_server(server, **kwargs)

        single = build(VllmServer, env=device_env(0))
        with single:
            points = measure(single, model, clients, args.seconds, args.client_processes)
        results["runs"].append({"model": model, "server": "single", "args": single.args[1:],
                                "startup_s": single.startup_seconds, "points": points})  # fmt: skip
        rpc = reserve_port()
        pair = group(build, rpc.port)
        started = time.monotonic()
        try:
            pair.start()
            startup = time.monotonic() - started
            points = measure(pair.head, model, clients, args.seconds, args.client_processes)
        finally:
            pair.stop()
            rpc.release()
        results["runs"].append({
            "model": model, "server": "dp2 head + headless node",
            "args": pair.head.args[1:], "node_args": pair.node.args[1:],
            "startup_s": startup, "points": points,
        })  # fmt: skip

    print(f"\ndevices: {', '.join(results['devices'])}")
    print("| model | server | clients | req/s | p50 ms | p99 ms | finished per engine |")
    print("|---|---|---:|---:|---:|---:|---|")
    for run in results["runs"]:
        for point in run["points"]:
            spread = point.get("finished_per_engine", "")
            print(f"| {run['model']} | {run['server']} | {point['concurrency']} | "
                  f"{point['req_per_s']:.1f} | {point['p50_ms']:.1f} | {point['p99_ms']:.1f} | "
                  f"{spread} |")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
