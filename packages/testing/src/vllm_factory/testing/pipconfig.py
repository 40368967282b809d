"""This host's pip settings, for uv.

uv does not read pip's configuration files or ``PIP_*`` variables. Where a host configures pip
(a local wheel directory holding the CPU torch, a constraints file, extra indexes), uv given
the same settings as its own variables installs what pip would. The noxfile (the sessions that
install vLLM) and the reference venvs (:mod:`vllm_factory.testing.refenv`) both use this.
Stdlib only: the noxfile imports it before any venv exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

# pip option names (as ``pip config list`` prints them) -> uv's variables.
PIP_TO_UV = {
    "find-links": "UV_FIND_LINKS",
    "constraint": "UV_CONSTRAINT",
    "index-url": "UV_INDEX_URL",
    "extra-index-url": "UV_EXTRA_INDEX_URL",
    "cert": "SSL_CERT_FILE",
}


def parse_pip_config(listed: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """uv variables for the output of ``pip config list`` (lines such as
    ``global.find-links='/x'`` or ``:env:.constraint='/y'``). Variables already set in
    ``environ`` win; several indexes are searched the way pip does (``unsafe-best-match``)."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        name = PIP_TO_UV.get(key.rsplit(".", 1)[-1])
        if name and not environ.get(name):
            found[name] = value.strip().strip("'\"")
    if "UV_EXTRA_INDEX_URL" in found and not environ.get("UV_INDEX_STRATEGY"):
        found["UV_INDEX_STRATEGY"] = "unsafe-best-match"
    return found


def pip_settings_for_uv(python: str | None = None) -> dict[str, str]:
    """This host's pip configuration as uv variables (see :func:`parse_pip_config`), read with
    ``python -m pip config list`` (default: this interpreter) or, where that interpreter has
    no pip (a venv uv made), with the ``pip`` on ``PATH``: pip's files and ``PIP_*`` variables
    are the host's, whichever pip reads them."""
    for command in ([python or sys.executable, "-m", "pip"], [shutil.which("pip3") or "pip"]):
        try:
            done = subprocess.run(
                [*command, "config", "list"], check=False, capture_output=True, text=True
            )
        except OSError:
            continue
        if done.returncode == 0:
            return parse_pip_config(done.stdout)
    return parse_pip_config("")


def uv() -> str | None:
    """The ``uv`` executable, or None where it is not installed (then pip does the work)."""
    return shutil.which("uv")
