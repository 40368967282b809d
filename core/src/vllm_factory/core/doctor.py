"""``vllm-factory-doctor``: is this environment able to serve our plugins?

Prints vLLM (version, CUDA or CPU build), torch and the device, then every installed
vllm-factory wheel with its entry points and whether its declared vLLM range admits the
installed vLLM. Exits 1 when something would stop a plugin from loading.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import sys
from dataclasses import asdict, dataclass, field

from vllm_factory.core.registration import declared_vllm_ranges, installed_vllm, range_admits

PLUGIN_GROUPS = ("vllm.general_plugins", "vllm.io_processor_plugins")


@dataclass
class WheelReport:
    name: str
    version: str
    entry_points: dict[str, str] = field(default_factory=dict)
    entry_point_errors: dict[str, str] = field(default_factory=dict)
    vllm_range: str = ""
    range_ok: bool | None = None


def factory_wheels() -> list[md.Distribution]:
    seen, found = set(), []
    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("vllm-factory-") and name not in seen:
            seen.add(name)
            found.append(dist)
    return sorted(found, key=lambda d: d.metadata["Name"].lower())


def check_wheel(dist: md.Distribution, load: bool) -> WheelReport:
    report = WheelReport(dist.metadata["Name"], dist.version)
    for ep in dist.entry_points:
        if ep.group not in PLUGIN_GROUPS:
            continue
        key = f"{ep.group}:{ep.name}"
        report.entry_points[key] = ep.value
        if load:
            try:
                ep.load()
            except Exception as error:  # noqa: BLE001 - any import failure is a finding
                report.entry_point_errors[key] = f"{type(error).__name__}: {error}"
    vllm = installed_vllm()
    if not declared_vllm_ranges(report.name):
        report.vllm_range = "any (does not use vLLM)"
    elif vllm is not None:
        report.range_ok, report.vllm_range = range_admits(report.name, vllm)
    return report


def environment() -> dict:
    info: dict = {"python": sys.version.split()[0]}
    vllm = installed_vllm()
    info["vllm"] = None if vllm is None else f"{vllm.distribution} {vllm.version}"
    info["vllm_flavour"] = None if vllm is None else vllm.flavour
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["device"] = f"cuda: {torch.cuda.get_device_name(0)}"
        else:
            info["device"] = "cpu"
    except ImportError:
        info["torch"] = None
        info["device"] = None
    # vLLM encodes /pooling responses with orjson when it is there (a dependency of core).
    try:
        info["orjson"] = md.version("orjson")
    except md.PackageNotFoundError:
        info["orjson"] = "missing: responses use the slow standard-library JSON encoder"
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vllm-factory-doctor", description=__doc__)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--no-load", action="store_true", help="do not import the entry points, only list them"
    )
    args = parser.parse_args(argv)

    env = environment()
    wheels = [check_wheel(d, load=not args.no_load) for d in factory_wheels()]
    problems = []
    if env["vllm"] is None:
        problems.append("vLLM is not installed (pip install 'vllm-factory-<model>[cuda|cpu]')")
    for wheel in wheels:
        if wheel.range_ok is False:
            problems.append(f"{wheel.name}: installed vLLM is outside {wheel.vllm_range}")
        for key, error in wheel.entry_point_errors.items():
            problems.append(f"{wheel.name}: entry point {key} fails to load: {error}")
    if not wheels:
        problems.append("no vllm-factory wheel is installed")

    if args.json:
        report = {"environment": env, "wheels": [asdict(w) for w in wheels], "problems": problems}
        print(json.dumps(report, indent=2))
    else:
        for key, value in env.items():
            print(f"{key:>13}: {value}")
        for wheel in wheels:
            verdict = {True: "ok", False: "UNSUPPORTED", None: "-"}[wheel.range_ok]
            print(
                f"\n{wheel.name} {wheel.version}  vLLM range {wheel.vllm_range or '-'}: {verdict}"
            )
            for key, value in wheel.entry_points.items():
                status = "FAILED" if key in wheel.entry_point_errors else "ok"
                print(f"    {key} -> {value} [{status}]")
        print()
        print("\n".join(f"problem: {p}" for p in problems) if problems else "all checks passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
