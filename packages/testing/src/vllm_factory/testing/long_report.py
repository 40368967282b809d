"""Reports of a long-document bench run (``--workload long``): the shared report
(:mod:`vllm_factory.testing.bench_report`) plus words per second, the documents' windows and
a words/s chart. Redraw from the JSON::

    python -m vllm_factory.testing.long_report RESULT.json
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from vllm_factory.testing import bench_report

logger = logging.getLogger(__name__)

__all__ = ["charts", "markdown", "write_all"]


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def long_lines(report: dict[str, Any]) -> list[str]:
    """The long-document section: documents, words/s of every point, the factors."""
    corpus, factors = report["corpus"], report.get("factors") or {}
    ref = report.get("reference") or {}
    lib = ref.get("library", "reference")
    settings = ref.get("settings") or {}
    docs = ", ".join(
        f"{name} words: {b['texts']} documents, {'/'.join(map(str, b.get('windows', [])))} windows"
        for name, b in sorted(corpus["buckets"].items(), key=lambda item: int(item[0]))
    )
    lines = [
        "", "## Long documents: words per second", "",
        (
            f"- Documents: {corpus['texts']} ({docs}); {corpus.get('words_total', 0):,} words, "
            f"{corpus.get('windows_total', 0)} windows in all, longest "
            f"{corpus.get('chars_max', 0):,} characters; one document per request, read in "
            "windows by the plugin (its default overlap) and by the reference in process (the "
            "same windows, at batch size 1 and with the windows of all its documents batched)"
        ),
    ]  # fmt: skip
    if settings:
        shown = {k: v for k, v in settings.items() if k in ("windowing", "overlap", "chunk_size",
                                                              "chunk_overlap", "documents")}  # fmt: skip
        lines.append(f"- Reference windows: {json.dumps(shown)}")
    if "plugin_peak_words_per_s" in factors:
        line = (
            f"- Plugin peak: **{_rate(factors['plugin_peak_words_per_s'])} words/s** at "
            f"{factors['plugin_peak_words_concurrency']} clients"
        )
        if "vs_reference_best_words" in factors:
            line += (
                f"; {lib} best ({_rate(factors['reference_best_words_per_s'])} words/s, "
                f"{factors['reference_best_words_batch_size']} windows a batch): "
                f"**{factors['vs_reference_best_words']:.2f}x**"
            )
        if "vs_reference_bs1_words" in factors:
            line += (
                f"; {lib} batch size 1 ({_rate(factors['reference_bs1_words_per_s'])} words/s): "
                f"**{factors['vs_reference_bs1_words']:.2f}x**"
            )
        lines.append(line)
    lines += ["", "| server | clients / batch size | documents/s | words/s | p50 ms | p99 ms |",
              "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, server in report["servers"].items():
        for p in server["points"]:
            lines.append(
                f"| {server.get('label', name)} | {p['concurrency']} | {p['req_per_s']:.3f} "
                f"| {_rate(p.get('words_per_s'))} | {bench_report._ms(p['p50_ms'])} "
                f"| {bench_report._ms(p['p99_ms'])} |"
            )
    for p in ref.get("points", []):
        lines.append(
            f"| {lib} in process | {p['batch_size']} | {p['req_per_s']:.3f} "
            f"| {_rate(p.get('words_per_s'))} | {bench_report._ms(p['p50_ms'])} "
            f"| {bench_report._ms(p['p99_ms'])} |"
        )
    return lines


def markdown(report: dict[str, Any]) -> str:
    """The shared report with the long-document section after its summary."""
    text = bench_report.markdown(report)
    head, sep, rest = text.partition("\n## Closed loop\n")
    section = "\n".join(long_lines(report)) + "\n"
    return head.rstrip("\n") + "\n" + section + sep + rest if sep else text + section


def charts(report: dict[str, Any], stem: Path) -> list[Path]:
    """The shared charts and ``<stem>-words.png``: words/s of each server by clients, the
    reference's at batch size 1 and at its best as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = bench_report.charts(report, stem)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, server in report["servers"].items():
        points = [p for p in server["points"] if p.get("words_per_s")]
        ax.plot([p["concurrency"] for p in points], [p["words_per_s"] for p in points],
                marker="o", label=server.get("label", name))  # fmt: skip
    ref = report.get("reference") or {}
    ref_points = [p for p in ref.get("points", []) if p.get("words_per_s")]
    if ref_points:
        best = max(ref_points, key=lambda p: p["words_per_s"])
        bs1 = next((p for p in ref_points if p["batch_size"] == 1), None)
        if bs1 is not None:
            same = " (= best)" if best is bs1 else ""
            ax.axhline(bs1["words_per_s"], color="tab:gray", linestyle=":",
                       label=f"{ref['library']} batch size 1{same}")  # fmt: skip
        if bs1 is None or best is not bs1:
            ax.axhline(best["words_per_s"], color="tab:green", linestyle="-.",
                       label=f"{ref['library']} best ({best['batch_size']} windows a batch)")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients (closed loop), one document each")
    ax.set_ylabel("words / s")
    ax.set_ylim(bottom=0)
    ax.set_title(
        f"Long documents: {report['plugin']} {report['config']['mode']} on "
        f"{report['machine']['name']}"
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return [*paths, bench_report.save_chart(fig, stem, "words")]


def write_all(report: dict[str, Any], folder: Path, stem: str) -> list[Path]:
    """JSON, Markdown (with the long-document section) and the three charts into ``folder``."""
    return bench_report.write_all(report, folder, stem, markdown, charts)


def main(argv: list[str] | None = None) -> None:
    bench_report.main(argv, markdown, charts)


if __name__ == "__main__":
    main()
