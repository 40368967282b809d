"""Soak: a server under peak load for minutes with hostile bodies mixed in, and what it did
over time (``nox -s soak``).

    python -m vllm_factory.testing.soak --plugin deberta_gliner [--device cuda]
        [--minutes 10] [--clients 256] [--hostile-share 0.05] [--checkpoint DIR] [--out DIR]

The plugin's benchmark checkpoint and corpus (its bench spec, as ``nox -s bench`` builds them;
``--checkpoint``: a served directory of your own, e.g. the tiny test checkpoint on a CPU), one
server started as the bench starts the plugin (bf16 and compiled on a GPU). Warm-up: each of the
family's hostile bodies (the fuzz suites' lists) once, then a minute of load; then ``clients``
closed-loop clients for ``minutes``, each request a corpus text or, with ``hostile_share``
probability, a hostile body. Every 10 s a window records valid answers per second, their p50 /
p99 latency, the hostile bodies' statuses, the resident memory and CPU share of the server's
processes by role and, on CUDA, the GPU's busy share; per hostile body the report gives its
statuses and latencies (which bodies the server answers and what each costs under load).

Pass (each checked, the verdicts in the report): no answer is a 5xx; the floor of the server's
memory (the lowest sample of a minute: what it keeps, not one step's activations) grows less than
5 % from the first minute after warm-up (when every kind of body has been through it) to the
last; the last minute's p99 is within 1.2x the first minute's after warm-up. Writes
``docs/benchmarks/<machine>/<date>-<commit>-<plugin>-soak.{json,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import random
import time
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
from vllm_factory.testing.bench_report import portable, record_stem, results_folder
from vllm_factory.testing.fuzz import resident_bytes
from vllm_factory.testing.loadgen import percentile
from vllm_factory.testing.usage import cpu_seconds, process_tree, role_of

logger = logging.getLogger(__name__)

WINDOW_S = 10.0
WARMUP_S = 60.0
MEMORY_GROWTH_LIMIT = 0.05
P99_GROWTH_LIMIT = 1.2
# Environment variables that change a server's memory or speed, recorded with the run.
RECORDED_ENV = ("VLLM_FACTORY_", "ONEDNN_", "DNNL_", "OMP_", "MALLOC_")
# Each family's hostile bodies (its fuzz suite's list), by the plugin's family.
HOSTILE_MODULES = {
    "gliner": "vllm_factory.testing.gliner.fuzz",
    "colbert": "vllm_factory.testing.colbert.fuzz",
    "colpali": "vllm_factory.testing.colpali.fuzz",
    "gliner2": "vllm_factory.testing.gliner2.fuzz",
}


# A model package's family, by the attribute its package module declares.
FAMILY_ATTRIBUTES = {
    "GLINER_ENCODER_TYPES": "gliner", "COLBERT_BACKBONE_TYPES": "colbert",
    "COLPALI_BACKBONE_TYPES": "colpali", "GLINER2_ENCODER_TYPES": "gliner2",
}  # fmt: skip


def family_of(plugin: str) -> str:
    package = importlib.import_module(f"vllm_factory.models.{plugin}")
    for attribute, family in FAMILY_ATTRIBUTES.items():
        if hasattr(package, attribute):
            return family
    raise SystemExit(f"--plugin {plugin}: no family with hostile bodies (one of "
                     f"{', '.join(sorted(HOSTILE_MODULES))})")  # fmt: skip


def hostile_bodies(family: str) -> list[dict]:
    return list(importlib.import_module(HOSTILE_MODULES[family]).HOSTILE)


async def _client(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    valid: list[dict],
    hostile: list[dict],
    share: float,
    seed: int,
    until: float,
    records: list[tuple[float, float, int, int]],
) -> None:
    """Closed loop until ``until``; each answer recorded as (done at, seconds, status, which
    hostile body or -1)."""
    rng = random.Random(seed)
    index = seed
    while time.monotonic() < until:
        which = rng.randrange(len(hostile)) if hostile and rng.random() < share else -1
        body = {"model": model, "data": hostile[which]} if which >= 0 else valid[index % len(valid)]
        index += 1
        started = time.monotonic()
        try:
            async with session.post(url, json=body) as response:
                await response.read()
                status = response.status
        except (TimeoutError, aiohttp.ClientError):
            status = 0  # a transport failure: counted with the server errors
        records.append((time.monotonic(), time.monotonic() - started, status, which))


def resident_by_role(pid: int) -> dict[str, int]:
    """Resident bytes of ``pid``'s tree by process role (``api``, ``engine``, ``worker``)."""
    roles: dict[str, int] = {}
    for child in process_tree(pid):
        role = role_of(child, pid)
        roles[role] = roles.get(role, 0) + resident_bytes(child, tree=False)
    return roles


def cpu_by_pid(pid: int) -> dict[int, tuple[str, float]]:
    """Each process of ``pid``'s tree: its role and CPU seconds so far."""
    out = {}
    for child in process_tree(pid):
        if (seconds := cpu_seconds(child)) is not None:
            out[child] = (role_of(child, pid), seconds)
    return out


class Sample(NamedTuple):
    at: float
    resident: dict[str, int]  # bytes by role
    cpu: dict[int, tuple[str, float]]  # pid: (role, CPU seconds so far)


async def _sample(pid: int, until: float, samples: list[Sample]) -> None:
    while time.monotonic() < until:
        samples.append(Sample(time.monotonic(), resident_by_role(pid), cpu_by_pid(pid)))
        await asyncio.sleep(2.0)


async def _gpu_busy(until: float, samples: list[tuple[float, float]]) -> None:
    """The GPU's busy share once a second (``nvidia-smi``), while the load runs."""
    query = ["--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "1000"]
    try:
        smi = await asyncio.create_subprocess_exec(
            "nvidia-smi", *query, stdout=asyncio.subprocess.PIPE
        )
    except OSError:
        logger.warning("nvidia-smi did not start: no GPU busy share in the windows")
        return
    assert smi.stdout is not None
    try:
        while time.monotonic() < until:
            try:
                line = await asyncio.wait_for(smi.stdout.readline(), timeout=5.0)
            except TimeoutError:
                continue
            if not line:
                break
            value = line.decode().split(",")[0].strip()
            if value.isdigit():
                samples.append((time.monotonic(), int(value) / 100))
    finally:
        if smi.returncode is None:
            smi.terminate()
        await smi.wait()


async def _load(
    server: Any, valid: list[dict], hostile: list[dict], args: argparse.Namespace
) -> tuple[float, list[tuple[float, float, int, int]], list[Sample], list[tuple[float, float]]]:
    records: list[tuple[float, float, int, int]] = []
    samples: list[Sample] = []
    gpu: list[tuple[float, float]] = []
    connector = aiohttp.TCPConnector(limit=args.clients)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        url = f"{server.url}/pooling"
        for which, data in enumerate(hostile):  # every body once, before anything is measured
            async with session.post(url, json={"model": server.model, "data": data}) as answer:
                await answer.read()
                if answer.status >= 500:
                    records.append((time.monotonic(), 0.0, answer.status, which))
        start = time.monotonic()
        until = start + args.minutes * 60
        tasks = [
            _client(
                session, url, server.model, valid, hostile, args.hostile_share, i, until, records
            )
            for i in range(args.clients)
        ]
        watchers = [_sample(server.process.pid, until, samples)]
        if args.device == "cuda":
            watchers.append(_gpu_busy(until, gpu))
        await asyncio.gather(*watchers, *tasks)
    return start, records, samples, gpu


def cpu_shares(samples: list[Sample]) -> dict[str, float]:
    """CPU seconds per second, by role, from the first of ``samples`` to the last (processes
    that started in between count from zero)."""
    if len(samples) < 2 or samples[-1].at <= samples[0].at:
        return {}
    first, last = samples[0].cpu, samples[-1].cpu
    used: dict[str, float] = {}
    for pid, (role, seconds) in last.items():
        used[role] = used.get(role, 0.0) + seconds - first.get(pid, (role, 0.0))[1]
    wall = samples[-1].at - samples[0].at
    return {role: round(value / wall, 2) for role, value in sorted(used.items())}


def windows(
    start: float,
    records,
    samples: list[Sample],
    end: float | None = None,
    gpu: list[tuple[float, float]] = (),
) -> list[dict[str, Any]]:
    """The run in windows of :data:`WINDOW_S` up to ``end`` (the answers still in flight after
    it are not load): valid req/s and latency, statuses, memory, CPU and GPU busy shares."""
    out = []
    if end is None:
        end = max((r[0] for r in records), default=start)
    at = start
    while at < end:
        stop = at + WINDOW_S
        inside = [r for r in records if at <= r[0] < stop]
        valid = [r[1] * 1000 for r in inside if r[3] < 0 and r[2] == 200]
        statuses: dict[str, int] = {}
        for _, _, status, which in inside:
            key = f"{'hostile' if which >= 0 else 'valid'} {status}"
            statuses[key] = statuses.get(key, 0) + 1
        # CPU from the last sample before the window to the last inside it.
        around = [s for s in samples if s.at < stop]
        around = around[-1 - sum(1 for s in around if s.at >= at) :]
        busy = [value for t, value in gpu if at <= t < stop]
        roles = [s.resident for s in samples if at <= s.at < stop]
        rss = [sum(m.values()) for m in roles]
        by_role = (
            {r: round(max(m.get(r, 0) for m in roles) / 2**20, 1) for r in roles[-1]}
            if roles
            else {}
        )
        out.append({
            "t": round(at - start, 1), "req_per_s": round(len(valid) / WINDOW_S, 2),
            "p50_ms": round(percentile(valid, 50), 2) if valid else None,
            "p99_ms": round(percentile(valid, 99), 2) if valid else None,
            "statuses": statuses, "rss_mib": round(max(rss) / 2**20, 1) if rss else None,
            "rss_floor_mib": round(min(rss) / 2**20, 1) if rss else None,
            "rss_mib_by_role": by_role, "cpu_by_role": cpu_shares(around),
            "gpu_busy": round(sum(busy) / len(busy), 3) if busy else None,
        })  # fmt: skip
        at = stop
    return out


def describe(body: dict[str, Any]) -> str:
    """A hostile body in a line: each field, with the length of what is long."""
    parts = []
    for key, value in body.items():
        if isinstance(value, list):
            inner = value[0] if value else None
            size = f"{len(value)}x{len(inner)}" if isinstance(inner, (str, list)) else len(value)
            parts.append(f"{key}[{size}]")
        elif isinstance(value, str) and len(value) > 24:
            parts.append(f"{key}({len(value)} chars)")
        else:
            parts.append(f"{key}={value!r}")
    return ", ".join(parts)


def per_hostile(records, hostile: list[dict], start: float) -> list[dict[str, Any]]:
    """Each hostile body under load: how often it went, its statuses, its latency."""
    out = []
    for which, body in enumerate(hostile):
        mine = [r for r in records if r[3] == which and r[0] >= start]
        statuses: dict[str, int] = {}
        for r in mine:
            statuses[str(r[2])] = statuses.get(str(r[2]), 0) + 1
        seconds = [r[1] * 1000 for r in mine]
        out.append({
            "body": describe(body), "sent": len(mine), "statuses": statuses,
            "p50_ms": round(percentile(seconds, 50), 1) if seconds else None,
            "max_ms": round(max(seconds), 1) if seconds else None,
        })  # fmt: skip
    return out


def verdicts(records, timeline: list[dict[str, Any]], start: float = 0.0) -> dict[str, Any]:
    """The pass verdicts. A minute's p99 is over every valid answer of that minute (not the
    worst of its windows' p99s, which follows where the few heavy hostile bodies landed)."""
    server_errors = [r for r in records if r[2] >= 500 or r[2] == 0]
    after = [w for w in timeline if w["t"] >= WARMUP_S]
    per_minute = int(60 / WINDOW_S)
    first, last = after[:per_minute], after[-per_minute:]

    def p99(part: list[dict]) -> float | None:
        if not part:
            return None
        begin, stop = start + part[0]["t"], start + part[-1]["t"] + WINDOW_S
        values = [r[1] * 1000 for r in records if begin <= r[0] < stop and r[3] < 0 and r[2] == 200]
        return round(percentile(values, 99), 2) if values else None

    def floor(part: list[dict]) -> float | None:
        values = [w["rss_floor_mib"] for w in part if w.get("rss_floor_mib") is not None]
        return min(values) if values else None

    first_floor, last_floor = floor(first), floor(last)
    growth = last_floor / first_floor - 1 if first_floor and last_floor else None
    first_p99, last_p99 = p99(first), p99(last)
    ratio = last_p99 / first_p99 if first_p99 and last_p99 else None
    return {
        "server_errors": len(server_errors),
        "rss_floor_first_minute_mib": first_floor,
        "rss_floor_last_minute_mib": last_floor,
        "memory_growth_after_warmup": None if growth is None else round(growth, 4),
        "p99_first_minute_ms": first_p99,
        "p99_last_minute_ms": last_p99,
        "p99_ratio": None if ratio is None else round(ratio, 3),
        "pass": {
            "no_5xx": not server_errors,
            "memory": growth is not None and growth < MEMORY_GROWTH_LIMIT,
            "p99": ratio is not None and ratio <= P99_GROWTH_LIMIT,
        },
    }


def chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = report["timeline"]
    t = [w["t"] / 60 for w in timeline]
    fig, axes = plt.subplots(4, 1, figsize=(8, 10), sharex=True)
    axes[0].plot(t, [w["req_per_s"] for w in timeline])
    axes[0].set_ylabel("valid req/s")
    axes[1].plot(t, [w["p99_ms"] for w in timeline], label="p99")
    axes[1].plot(t, [w["p50_ms"] for w in timeline], label="p50")
    axes[1].set_ylabel("latency (ms)")
    axes[1].legend()
    axes[2].plot(t, [w["rss_mib"] for w in timeline], label="peak")
    axes[2].plot(t, [w.get("rss_floor_mib") for w in timeline], label="floor")
    axes[2].legend()
    axes[2].set_ylabel("server RSS (MiB)")
    roles = sorted({role for w in timeline for role in w.get("cpu_by_role", {})})
    for role in roles:
        axes[3].plot(t, [w.get("cpu_by_role", {}).get(role) for w in timeline], label=f"{role} CPU")
    if any(w.get("gpu_busy") is not None for w in timeline):
        axes[3].plot(t, [w.get("gpu_busy") for w in timeline], label="GPU busy", color="black")
    axes[3].set_ylabel("cores / GPU share")
    axes[3].legend(fontsize="small")
    axes[3].set_xlabel("minutes")
    for ax in axes:
        ax.axvline(WARMUP_S / 60, color="grey", linestyle=":")
    config = report["config"]
    fig.suptitle(f"soak: {config['plugin']} on {report['machine']}, {config['clients']} clients, "
                 f"{config['hostile_share']:.0%} hostile")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from vllm_factory.testing import bench
    from vllm_factory.testing.server import VllmServer

    parser = argparse.ArgumentParser(prog="soak", description=__doc__.splitlines()[0])
    parser.add_argument("--plugin", default="deberta_gliner")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--hostile-share", type=float, default=0.05)
    parser.add_argument("--server-arg", action="append", default=[])
    parser.add_argument("--checkpoint", type=Path, help="a served directory instead of the spec's")
    parser.add_argument("--machine", default=None)
    parser.add_argument(
        "--ref-python", help="the reference library's interpreter that builds the checkpoint "
        "(as the bench's; default: the kit's venv)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, help="writes into <out>/<machine>/ (default: docs/benchmarks/)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    spec = bench.load_spec(args.plugin, None)
    config = bench.default_config(spec.name, args.device, quick=True)
    config.server_args = list(args.server_arg)
    config.ref_python = args.ref_python
    if args.checkpoint:
        config.checkpoint = str(args.checkpoint.resolve())
    max_tokens = bench.max_tokens_of(config.lengths)
    checkpoint = spec.checkpoint(config, max_tokens)
    corpus = spec.corpus(config, checkpoint)
    if corpus is None:
        pool = bench.word_pool(spec.word_texts())
        corpus = bench.build_corpus(config.lengths, config.corpus_size, config.seed, pool,
                                    spec.token_counter(checkpoint))  # fmt: skip
    plugin = spec.servers(checkpoint)[0]
    family = family_of(spec.name)
    server = VllmServer(
        plugin.checkpoint or checkpoint, io_processor_plugin=plugin.io_processor_plugin,
        hf_overrides=plugin.hf_overrides, extra_args=plugin.vllm_args(config.server_args),
        dtype=config.dtype, max_model_len=spec.max_model_len(checkpoint, max_tokens),
        enforce_eager=config.enforce_eager, worker_in_engine=False,
    )  # fmt: skip
    info = bench.machine_info(args.device)
    machine = args.machine or bench.machine_name(info)
    with server:
        model = str(plugin.checkpoint or checkpoint)
        valid = [plugin.make_body(model, text, "float") for text in corpus.texts]
        hostile = hostile_bodies(family)
        start, records, samples, gpu = asyncio.run(_load(server, valid, hostile, args))
    timeline = windows(start, records, samples, start + args.minutes * 60, gpu)
    report = portable(
        {
            "benchmark": "vllm-factory soak",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine,
            "config": {
                "plugin": spec.name,
                "checkpoint": checkpoint.name,
                "device": args.device,
                "minutes": args.minutes,
                "clients": args.clients,
                "hostile_share": args.hostile_share,
                "dtype": config.dtype,
                "server_args": server.args[1:],
                "environment": {
                    k: v for k, v in sorted(os.environ.items()) if k.startswith(RECORDED_ENV)
                },
            },
            "requests": len(records),
            "timeline": timeline,
            "hostile": per_hostile(records, hostile, start),
            "verdicts": verdicts(records, timeline, start),
        }
    )
    out = args.out / machine if args.out else results_folder(bench.repo_root(), machine)
    out.mkdir(parents=True, exist_ok=True)
    stem = record_stem(f"{spec.name}-soak", bench.repo_root())
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    chart(report, out / f"{stem}.png")
    print(json.dumps(report["verdicts"], indent=2))
    return report


if __name__ == "__main__":
    main()
