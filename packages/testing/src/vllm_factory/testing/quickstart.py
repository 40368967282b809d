"""The README's quickstart as a test: each model's block, run as written.

The repository README has one fenced ``bash`` block per family, starting with
``pip install 'vllm-factory-<model>[cuda]'``: maybe a ``vllm-factory-prep`` command, a
``vllm serve`` command and a ``curl`` request. :func:`quickstart` reads the block of one wheel;
:func:`served` runs its prep (if any) and serve commands on a local tiny checkpoint in place of
the hub id and returns the server; :func:`answer` sends the block's request body to it. A
model package's test then checks the answer's shape as the README describes it.

The server adds what every test server adds (``--enforce-eager`` on the CPU test host, the
session's dtype); the README's own flags come last and win.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_factory.testing.server import VllmServer

FENCE = "```"


@dataclass(frozen=True)
class Quickstart:
    """One README block: the prep command's arguments (or ``None``), the serve command's
    arguments after the model, the model the request names, and the request's ``data``."""

    prep: list[str] | None
    serve_flags: list[str]
    model: str
    data: dict[str, Any]


def readme_path() -> Path:
    from vllm_factory.testing.bench import repo_root

    return repo_root() / "README.md"


def _commands(block: str) -> list[list[str]]:
    """The block's commands, continuation lines joined and comments dropped, shell-split."""
    lines = [line for line in block.splitlines() if not line.lstrip().startswith("#")]
    text = "\n".join(lines).replace("\\\n", " ")
    commands, current = [], ""
    for line in text.splitlines():  # a curl's quoted JSON spans lines: split when quotes close
        current = f"{current}\n{line}" if current else line
        try:
            words = shlex.split(current)
        except ValueError:
            continue
        if words:
            commands.append(words)
        current = ""
    return commands


def quickstart(distribution: str, readme: Path | None = None) -> Quickstart:
    """The README block that installs ``distribution``."""
    text = (readme or readme_path()).read_text(encoding="utf-8")
    blocks = text.split(FENCE)[1::2]
    marker = f"pip install '{distribution}[cuda]'"
    (block,) = [b for b in blocks if marker in b]
    prep, serve, data, model = None, None, None, None
    for words in _commands(block):
        if words[0] == "vllm-factory-prep":
            prep = words[1:]
        elif words[:2] == ["vllm", "serve"]:
            model, serve = words[2], words[3:]
        elif words[0] == "curl":
            body = json.loads(words[words.index("-d") + 1])
            data = body["data"]
            assert body["model"] == model, (body["model"], model)
    assert serve is not None and data is not None and model is not None, block
    return Quickstart(prep, serve, model, data)


def prepare(quick: Quickstart, checkpoint: Path, out: Path) -> Path:
    """The block's prep command on ``checkpoint`` (for its hub id), writing ``out`` (for its
    output folder): the console script as the README runs it."""
    assert quick.prep is not None
    args = list(quick.prep)
    args[args.index("--model") + 1] = str(checkpoint)
    args[args.index("--output") + 1] = str(out)
    script = Path(sys.executable).parent / "vllm-factory-prep"
    subprocess.run([str(script), *args], check=True, capture_output=True, text=True)
    return out


def served(quick: Quickstart, checkpoint: Path, workdir: Path) -> VllmServer:
    """A server started with the block's commands on ``checkpoint`` (prepared first where the
    block prepares)."""
    model = prepare(quick, checkpoint, workdir / "served") if quick.prep else checkpoint
    return VllmServer(model, max_model_len=None, extra_args=quick.serve_flags)


def answer(server: VllmServer, quick: Quickstart) -> Any:
    """The block's request, sent to ``server``: the answer's ``data``."""
    import httpx

    response = httpx.post(f"{server.url}/pooling", json={"model": server.model,
                          "data": quick.data}, timeout=600)  # fmt: skip
    assert response.status_code == 200, response.text
    return response.json()["data"]


def is_vector(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(x, float) for x in value)


def is_token_vectors(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(is_vector(row) for row in value)
