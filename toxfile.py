"""tox's inline plugin: one env per workspace package with vLLM-free tests (packages/testing/tools/workspace.py),
so a new package is picked up by ``tox`` with no edit here or in tox.ini."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from tox.config.loader.memory import MemoryLoader
from tox.config.sets import ConfigSet
from tox.plugin import impl
from tox.session.state import State

sys.path.insert(0, str(Path(__file__).parent / "packages" / "testing" / "tools"))
import workspace  # stdlib only: the packages, as their own tables describe them

TESTED = [p for p in workspace.packages() if p.vllm_free_tests]
# tox.ini takes the shared pins from here ({env:WORKSPACE_...}); their one home is the root
# pyproject.toml.
os.environ["WORKSPACE_CPU_TORCH"] = workspace.settings().cpu_torch
os.environ["WORKSPACE_RUFF"] = workspace.settings().ruff


@impl
def tox_extend_envs() -> Iterable[str]:
    return [p.name for p in TESTED]


@impl
def tox_add_core_config(core_conf: ConfigSet, state: State) -> None:
    for package in TESTED:
        state.conf.memory_seed_loaders[package.name].append(
            MemoryLoader(
                description=f"{package.distribution}: {package.vllm_free_tests}, without vLLM",
                labels=["unit"],
            )
        )
