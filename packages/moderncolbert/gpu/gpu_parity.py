"""GPU parity run for the ModernColBERT plugin: served vLLM outputs vs PyLate's CPU reference.

Runs on the GPU machine, in its python3, after the vLLM wheelhouse's install.sh, with
PYTHONPATH=$HOME/site. From the repository root:

    python3 packages/moderncolbert/gpu/gpu_parity.py --out "$OUT" --deadline EPOCH_SECONDS

Steps (each one recorded in the JSON result, a failure in one does not stop the others):
  1. install our wheels (.gpu/ours/*.whl) into --site with pip --no-index --no-deps --target;
  2. for each --dtypes entry (float32, bfloat16): start the OpenAI server with our plugin, first
     with vLLM's defaults (torch.compile + CUDA graphs); if the server does not start or its
     answers are wrong, start it again with --enforce-eager and record both attempts;
     send every query and document of the corpus (one batched request per part, then one
     request per item, concurrently) and compare with the PyLate reference: identical token
     counts, per-token cosine >= 0.9999 (float32) / >= 0.999 (bfloat16);
  3. the kernels' GPU tests (`python -m pytest kernels-pkg/tests -q`, started in the
     background at step 2 and collected after it) and then, alone on the GPU, their benchmark
     (`kernels-pkg/benchmarks/bench_kernels.py --out OUT/kernels-bench-<gpu>.json`), when
     present.
Writes OUT/gpu-parity-<gpu>.json, OUT/server-logs-<gpu>.txt and OUT/kernels-pytest-<gpu>.txt,
prints a table, and exits 1 when any check failed (2 when nothing could run at all).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import glob
import importlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[3]
THRESHOLDS = {"float32": 0.9999, "bfloat16": 0.999}
ARCH_OVERRIDES = {"architectures": ["ModernColBERTForRetrieval"]}
IO_PLUGIN = "moderncolbert_io"
PARTS = ("query", "document")


def log(msg: str) -> None:
    stamp = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp}] {msg}", flush=True)


class Clock:
    """Time left before the caller's deadline (the device command's limit, less a margin)."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline

    def left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.time()


# ---------------------------------------------------------------------------------------------
# environment


def sh(cmd: list[str], timeout: float = 60) -> str:
    try:
        res = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
        return (res.stdout + res.stderr).strip()
    except Exception as exc:  # noqa: BLE001 - informational only
        return f"<{type(exc).__name__}: {exc}>"


def gpu_name() -> str:
    name = sh(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()
    return name[0].strip() if name and not name[0].startswith("<") else "no-gpu"


def gpu_slug(name: str) -> str:
    low = name.lower()
    for key in ("h200", "h100", "a100", "l40s", "l4", "a10"):
        if key in low:
            return key
    return re.sub(r"[^a-z0-9]+", "-", low).strip("-") or "gpu"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for dist in (
        "torch",
        "vllm",
        "transformers",
        "tokenizers",
        "triton",
        "numpy",
        "vllm-factory-core",
        "vllm-factory-kernels",
        "vllm-factory-modernbert",
        "vllm-factory-colbert",
        "vllm-factory-moderncolbert",
    ):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "missing"
    return out


def install_wheels(wheels: Path, site: Path) -> dict[str, Any]:
    found = sorted(glob.glob(str(wheels / "*.whl")))
    if len(found) != 5:
        raise RuntimeError(f"expected our 5 wheels in {wheels}, found {found}")
    # One pip call for all five: vllm_factory is a namespace shared by them, and
    # pip --target merges top-level folders only within one call.
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--no-cache-dir",
        "--upgrade",
        "--target",
        str(site),
        *found,
    ]
    log("installing our wheels: " + " ".join(Path(w).name for w in found))
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=180)
    if res.returncode:
        raise RuntimeError(f"pip failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    return {"wheels": [Path(w).name for w in found], "site": str(site)}


# ---------------------------------------------------------------------------------------------
# reference and comparison


def load_reference(path: Path) -> dict[str, list[np.ndarray]]:
    with np.load(path) as z:
        ref = {}
        for part in PARTS:
            off, vec = z[f"{part}_offsets"], z[f"{part}_vectors"]
            ref[part] = [vec[off[i] : off[i + 1]] for i in range(len(off) - 1)]
    return ref


def compare(served: list[np.ndarray], ref: list[np.ndarray], counts: list[int]) -> dict:
    """Token counts and per-token cosine of served vs reference, item by item."""
    mismatched, min_cos, sum_cos, n_tok, max_abs, worst = [], 1.0, 0.0, 0, 0.0, None
    num_tokens_field_bad = []
    for i, (ours, theirs) in enumerate(zip(served, ref, strict=True)):
        ours = np.asarray(ours, dtype=np.float64)
        theirs = np.asarray(theirs, dtype=np.float64)
        if counts[i] != len(ours):
            num_tokens_field_bad.append(i)
        if ours.shape != theirs.shape:
            mismatched.append({"item": i, "served": list(ours.shape), "ref": list(theirs.shape)})
            continue
        if not len(ours):
            continue
        cos = (ours * theirs).sum(1) / np.maximum(
            np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1), 1e-30
        )
        if float(cos.min()) < min_cos:
            min_cos, worst = float(cos.min()), {"item": i, "token": int(cos.argmin())}
        sum_cos += float(cos.sum())
        n_tok += len(cos)
        max_abs = max(max_abs, float(np.abs(ours - theirs).max()))
    return {
        "items": len(ref),
        "tokens_served": int(sum(len(s) for s in served)),
        "tokens_ref": int(sum(len(r) for r in ref)),
        "count_mismatches": mismatched,
        "num_tokens_field_mismatches": num_tokens_field_bad,
        "min_cosine": min_cos,
        "mean_cosine": sum_cos / max(n_tok, 1),
        "max_abs_diff": max_abs,
        "worst": worst,
    }


# ---------------------------------------------------------------------------------------------
# serving


def stop_server(server: Any) -> None:
    """Stop the server and everything in its process group (it starts a new session)."""
    proc = server.process
    try:
        server.stop()
    finally:
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    # Let the GPU memory of the engine process go before the next server starts.
    for _ in range(60):
        used = sh(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], 10)
        if not used.strip() or used.startswith("<"):
            break
        time.sleep(0.5)


def encode_all(server: Any, texts: list[str], is_query: bool) -> tuple[list, list]:
    res = server.pooling({"text": texts, "is_query": is_query}, timeout=300)
    if res.status_code != 200:
        raise RuntimeError(f"HTTP {res.status_code}: {res.text[:2000]}")
    data = res.json()["data"]
    if len(data) != len(texts):
        raise RuntimeError(f"{len(data)} results for {len(texts)} texts")
    return (
        [np.asarray(d["embeddings"], dtype=np.float32) for d in data],
        [int(d["num_tokens"]) for d in data],
    )


def encode_each(server: Any, texts: list[str], is_query: bool) -> tuple[list, list]:
    def one(text: str) -> tuple[np.ndarray, int]:
        vecs, counts = encode_all(server, [text], is_query)
        return vecs[0], counts[0]

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, texts))
    return [r[0] for r in results], [r[1] for r in results]


def run_attempt(
    args: argparse.Namespace,
    dtype: str,
    eager: bool,
    corpus: dict,
    ref: dict,
    clock: Clock,
    logs: list[str],
) -> dict[str, Any]:
    from vllm_factory.core.testing.server import ServerStartError, VllmServer

    mode = "eager" if eager else "default (torch.compile + CUDA graphs)"
    attempt: dict[str, Any] = {"dtype": dtype, "enforce_eager": eager, "mode": mode}
    timeout = max(30.0, min(args.startup_timeout, clock.left() - 60))
    server = VllmServer(
        args.data / "checkpoint",
        io_processor_plugin=IO_PLUGIN,
        hf_overrides=ARCH_OVERRIDES,
        dtype=dtype,
        max_model_len=512,
        enforce_eager=eager,
        startup_timeout=timeout,
        python=sys.executable,
        extra_args=args.server_arg,
        env={
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "VLLM_LOGGING_LEVEL": "INFO",
        },
    )
    attempt["command"] = " ".join(server.args)
    log(f"[{dtype}] starting server, {mode}, start timeout {timeout:.0f} s")
    try:
        server.start()
        attempt["startup_seconds"] = round(server.startup_seconds, 1)
        log(f"[{dtype}] healthy after {server.startup_seconds:.1f} s")
        attempt["results"] = {}
        ok = True
        for part, key, is_query in (
            ("query", "queries", True),
            ("document", "documents", False),
        ):
            texts = [x["text"] for x in corpus[key]]
            for how, fn in (("batched", encode_all), ("one_per_request", encode_each)):
                t0 = time.monotonic()
                vecs, counts = fn(server, texts, is_query)
                res = compare(vecs, ref[part], counts)
                res["seconds"] = round(time.monotonic() - t0, 3)
                res["pass"] = (
                    not res["count_mismatches"]
                    and not res["num_tokens_field_mismatches"]
                    and res["min_cosine"] >= THRESHOLDS[dtype]
                )
                ok &= res["pass"]
                attempt["results"][f"{part}/{how}"] = res
                log(
                    f"[{dtype}] {part}/{how}: tokens {res['tokens_served']}/{res['tokens_ref']}"
                    f" count mismatches {len(res['count_mismatches'])}"
                    f" min cos {res['min_cosine']:.8f} -> {'PASS' if res['pass'] else 'FAIL'}"
                )
        attempt["pass"] = ok
        attempt["server_alive_after"] = server.is_alive()
    except ServerStartError as exc:
        attempt["pass"] = False
        attempt["error"] = "server did not start: " + str(exc).splitlines()[0]
        attempt["error_log_tail"] = str(exc)[-6000:]
        log(f"[{dtype}] {attempt['error']}")
    except Exception as exc:  # noqa: BLE001 - recorded, run goes on
        attempt["pass"] = False
        attempt["error"] = f"{type(exc).__name__}: {exc}"[:4000]
        attempt["error_log_tail"] = server.log_tail(120)[-6000:]
        log(f"[{dtype}] error: {attempt['error'][:500]}")
    finally:
        stop_server(server)
        if server.log_path and server.log_path.exists():
            text = server.log_path.read_text(errors="replace")
            logs.append(f"===== {dtype} / {mode} =====\n{' '.join(server.args)}\n{text}\n")
            attempt["log_facts"] = log_facts(text)
    return attempt


def log_facts(text: str) -> dict[str, Any]:
    """A few lines of the server log worth keeping in the JSON (backend, compile, graphs)."""
    pats = (
        "attention backend",
        "backend",
        "compil",
        "cuda graph",
        "cudagraph",
        "graph capturing",
        "torch.compile",
        "Error",
        "error",
        "Traceback",
        "WARNING",
        "fallback",
    )
    keep = [ln.strip()[:400] for ln in text.splitlines() if any(p in ln for p in pats)]
    return {
        "lines": keep[:60],
        "n_lines": len(text.splitlines()),
        # vLLM compiles only models marked with @support_torch_compile; without that, and as
        # pooling models get PIECEWISE graphs only, neither compile nor CUDA graphs apply.
        "torch_compile_not_supported_warning": "does not support it" in text,
        "cudagraph_mode_overridden_to_piecewise": "Overriding cudagraph_mode to PIECEWISE" in text,
    }


def parity(args: argparse.Namespace, clock: Clock, logs: list[str]) -> dict[str, Any]:
    corpus = json.loads((args.data / "corpus.json").read_text(encoding="utf-8"))
    ref = load_reference(args.data / "ref-pylate.npz")
    out: dict[str, Any] = {}
    for dtype in args.dtypes:
        if clock.left() < 90:
            out[dtype] = {"pass": False, "error": "skipped: not enough time left"}
            continue
        attempts = []
        if not args.eager_only:
            attempts.append(run_attempt(args, dtype, False, corpus, ref, clock, logs))
        if (args.eager_only or not attempts[-1]["pass"]) and clock.left() >= 90:
            if attempts:
                log(f"[{dtype}] default mode failed; retrying with --enforce-eager")
            attempts.append(run_attempt(args, dtype, True, corpus, ref, clock, logs))
        final = attempts[-1]
        out[dtype] = {
            "pass": final["pass"],
            "threshold_min_cosine": THRESHOLDS[dtype],
            "compile_and_cuda_graphs_worked": None if args.eager_only else attempts[0]["pass"],
            "needed_enforce_eager": (
                not args.eager_only and not attempts[0]["pass"] and final["pass"]
            ),
            "attempts": attempts,
        }
    return out


# ---------------------------------------------------------------------------------------------
# kernels


def start_kernel_tests(args: argparse.Namespace, slug: str) -> dict[str, Any]:
    """Start the kernels' pytest in the background (it runs beside the parity servers)."""
    tests = REPO / "kernels-pkg" / "tests"
    if not tests.is_dir():
        return {"ran": False, "error": "kernels-pkg/tests not present"}
    path = args.out / f"kernels-pytest-{slug}.txt"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "kernels-pkg/tests",
        "-q",
        "-rfEs",
        "-p",
        "no:cacheprovider",
    ]
    log("kernels: started in the background: " + " ".join(cmd[1:]))
    handle = open(path, "w")  # noqa: SIM115 - closed in finish_kernel_tests
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    return {
        "ran": True,
        "_proc": proc,
        "_handle": handle,
        "_path": path,
        "_t0": time.monotonic(),
        "command": " ".join(cmd[1:]),
    }


def finish_kernel_tests(state: dict[str, Any], clock: Clock) -> dict[str, Any]:
    if not state.get("ran"):
        return state
    proc, handle, path = state.pop("_proc"), state.pop("_handle"), state.pop("_path")
    t0 = state.pop("_t0")
    try:
        rc: Any = proc.wait(timeout=max(5.0, min(300.0, clock.left() - 60)))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc = "timeout"
    handle.close()
    text = path.read_text(errors="replace")
    summary = [
        ln for ln in text.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", ln)
    ]
    state.update(
        {
            "returncode": rc,
            "pass": rc == 0,
            "log": path.name,
            "summary": summary[-1] if summary else text[-500:],
            "seconds": round(time.monotonic() - t0, 1),
            "note": "ran concurrently with the parity servers",
        }
    )
    log(f"kernels pytest: rc={rc} {state['summary']}")
    return state


def run_kernel_bench(args: argparse.Namespace, clock: Clock, slug: str) -> dict[str, Any]:
    bench = REPO / "kernels-pkg" / "benchmarks" / "bench_kernels.py"
    if not bench.is_file():
        return {"ran": False, "error": "kernels-pkg/benchmarks/bench_kernels.py absent"}
    budget = min(240.0, clock.left() - 10)
    if budget < 30:
        return {"ran": False, "error": "skipped: not enough time left"}
    target = args.out / f"kernels-bench-{slug}.json"
    log(f"kernels: {bench.relative_to(REPO)} --out {target} (timeout {budget:.0f} s)")
    t0 = time.monotonic()
    try:
        res = subprocess.run(
            [sys.executable, str(bench), "--out", str(target)],
            check=False,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=budget,
        )
        text, rc = res.stdout + res.stderr, res.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout
        text = out.decode(errors="replace") if isinstance(out, bytes) else (out or "")
        rc = "timeout"
    print(text, flush=True)
    log(f"kernels bench: rc={rc}")
    return {
        "ran": True,
        "returncode": rc,
        "pass": rc == 0,
        "json": target.name if target.exists() else None,
        "output_tail": text[-3000:],
        "seconds": round(time.monotonic() - t0, 1),
    }


# ---------------------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    rows = [
        (
            "dtype",
            "mode",
            "start s",
            "part/how",
            "tokens srv/ref",
            "cnt mism",
            "min cos",
            "max |d|",
            "verdict",
        )
    ]
    for dtype, entry in result.get("parity", {}).items():
        for att in entry.get("attempts", []):
            mode = "eager" if att["enforce_eager"] else "compile+graphs"
            start = str(att.get("startup_seconds", "-"))
            if "results" not in att or not att["results"]:
                rows.append(
                    (
                        dtype,
                        mode,
                        start,
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        "FAIL: " + att.get("error", "?")[:60],
                    )
                )
            for key, res in att.get("results", {}).items():
                rows.append(
                    (
                        dtype,
                        mode,
                        start,
                        key,
                        f"{res['tokens_served']}/{res['tokens_ref']}",
                        str(len(res["count_mismatches"])),
                        f"{res['min_cosine']:.8f}",
                        f"{res['max_abs_diff']:.2e}",
                        "PASS" if res["pass"] else "FAIL",
                    )
                )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for name, entry in result.get("kernels", {}).items():
        lines.append(
            f"kernels {name}: "
            + (
                f"rc={entry.get('returncode')} {entry.get('summary', '')}"
                if entry.get("ran")
                else entry.get("error", "")
            )
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-out")))
    ap.add_argument("--wheels", type=Path, default=REPO / ".gpu" / "ours")
    ap.add_argument("--data", type=Path, default=REPO / ".gpu" / "data")
    ap.add_argument("--site", type=Path, default=Path.home() / "site")
    ap.add_argument("--skip-install", action="store_true", help="our wheels are installed")
    ap.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32", "bfloat16"],
        choices=sorted(THRESHOLDS),
    )
    ap.add_argument("--eager-only", action="store_true", help="skip the default-mode attempt")
    ap.add_argument("--skip-kernels", action="store_true")
    ap.add_argument("--startup-timeout", type=float, default=300.0)
    ap.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra argument for the server (repeat)",
    )
    ap.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="epoch seconds by which to be done (steps are skipped after it)",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    clock = Clock(args.deadline)

    name = gpu_name()
    slug = gpu_slug(name)
    result: dict[str, Any] = {
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "gpu": name,
        "host": platform.node(),
        "nvidia_smi": sh(
            [
                "nvidia-smi",
                "--query-gpu=name,memory.total,driver_version",
                "--format=csv,noheader",
            ]
        ),
    }
    started = time.monotonic()
    failed = False
    try:
        if not args.skip_install:
            result["install"] = install_wheels(args.wheels, args.site)
    except Exception as exc:  # noqa: BLE001
        result["install"] = {"error": f"{type(exc).__name__}: {exc}"}
        failed = True
        log(result["install"]["error"])
    result["versions"] = versions()
    log(f"GPU {name}; versions {result['versions']}")

    logs: list[str] = []
    tests: dict[str, Any] = {}
    if not args.skip_kernels:
        try:
            tests = start_kernel_tests(args, slug)
        except Exception:  # noqa: BLE001
            result["kernels_error"] = traceback.format_exc()
    if not failed:
        try:
            result["parity"] = parity(args, clock, logs)
        except Exception:  # noqa: BLE001
            result["parity_error"] = traceback.format_exc()
            log(result["parity_error"])
    if not args.skip_kernels:
        try:
            result["kernels"] = {
                "pytest": finish_kernel_tests(tests, clock)
                if tests
                else {"ran": False, "error": "not started"}
            }
            result["kernels"]["bench"] = run_kernel_bench(args, clock, slug)
        except Exception:  # noqa: BLE001
            result["kernels_error"] = traceback.format_exc()
            log(result["kernels_error"])
    result["seconds"] = round(time.monotonic() - started, 1)

    parity_ok = bool(result.get("parity")) and all(e.get("pass") for e in result["parity"].values())
    kernels_ok = (
        all(e.get("pass", True) for e in result.get("kernels", {}).values() if e.get("ran"))
        and "kernels_error" not in result
    )
    result["pass"] = parity_ok and kernels_ok and not failed
    (args.out / f"gpu-parity-{slug}.json").write_text(json.dumps(result, indent=2))
    if logs:
        (args.out / f"server-logs-{slug}.txt").write_text("\n".join(logs))
    print(table(result), flush=True)
    print(
        f"OVERALL: {'PASS' if result['pass'] else 'FAIL'} "
        f"(parity {'ok' if parity_ok else 'FAILED'}, kernels {'ok' if kernels_ok else 'FAILED'})",
        flush=True,
    )
    if failed:
        return 2
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
