"""Adding a model of an existing family is adding one folder: checked on a throw-away copy.

Copies this checkout (tracked and untracked, not ignored) to a temporary folder, adds a model
package ``templatecheck`` there by copying ``packages/models/moderncolbert`` (the template,
docs/adding-a-model.md) and renaming what identifies it, then, editing nothing else, checks
that packages/testing/tools/workspace.py, the noxfile (``tests``, ``matrix``, ``build``) and tox pick it up:
its wheel builds and its tox env installs it and passes its vLLM-free tests (packaging
contract included). Run by ``nox -s template`` (CI); needs tox, nox and build installed.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE, NEW = "moderncolbert", "templatecheck"
RENAMES = [(TEMPLATE, NEW), ("ModernColBERT", "TemplateCheck")]
logger = logging.getLogger("check_template")


def copy_checkout(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a deleted, not yet committed file is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def add_model(repo: Path) -> Path:
    """What a developer does: copy the template folder and rename what identifies it."""
    source, target = repo / "packages/models" / TEMPLATE, repo / "packages/models" / NEW
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("results", "__pycache__"))
    for path in sorted(target.rglob("*"), key=lambda p: -len(p.parts)):
        if TEMPLATE in path.name:
            path.rename(path.with_name(path.name.replace(TEMPLATE, NEW)))
    for path in target.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".toml", ".md", ".txt"):
            text = path.read_text(encoding="utf-8")
            for old, new in RENAMES:
                text = text.replace(old, new)
            if path.name == "pyproject.toml":  # one representative per family; no GPU runs yet
                text = re.sub(r"(?m)^representative = true\n", "", text)
                text = re.sub(r"(?ms)^(# [^\n]*\n)?gpu-results = \[.*?^\]\n", "", text)
            path.write_text(text, encoding="utf-8")
    return target


def run(repo: Path, *args: str) -> str:
    logger.info("$ %s", " ".join(args))
    done = subprocess.run(args, cwd=repo, check=False, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                         f"\n{done.stderr[-3000:]}")  # fmt: skip
    return done.stdout


def check(repo: Path, package: Path) -> None:
    folder = package.relative_to(repo).as_posix()
    listing = run(repo, sys.executable, "packages/testing/tools/workspace.py")
    assert f"vllm-factory-{NEW}" in listing, listing
    probe = (
        "import noxfile as n; p = [x.folder for x in n.PACKAGES]; "
        f"assert {folder!r} in p, p; "
        f"assert {folder + '/tests'!r} in n.ALL_TESTS, n.ALL_TESTS; "
        f"assert {folder + '/tests'!r} in n.MATRIX_TESTS, n.MATRIX_TESTS; "
        f"assert {folder + '/tests'!r} not in n.MATRIX_CI_TESTS; print('noxfile: ok')"
    )
    logger.info(run(repo, sys.executable, "-c", probe).strip())
    wheels = repo / "dist-check"
    run(repo, sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), folder)
    (wheel,) = wheels.glob(f"vllm_factory_{NEW}-*.whl")
    logger.info("wheel: %s", wheel.name)
    envs = run(repo, "tox", "list", "-q")
    assert re.search(rf"(?m)^{NEW}\b", envs), envs
    logger.info(run(repo, "tox", "-e", NEW, "--", "-q").strip().splitlines()[-3:])


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="check_template: %(message)s")
    with tempfile.TemporaryDirectory(prefix="vllm-factory-template-") as tmp:
        repo = Path(tmp)
        copy_checkout(repo)
        package = add_model(repo)
        check(repo, package)
    logger.info("a copied model package is picked up by workspace, nox, the build and tox")


if __name__ == "__main__":
    main()
