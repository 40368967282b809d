"""What the families' fixture modules share: the ``parity`` marker hook and the one
package-specific session fixture a package's ``tests/conftest.py`` declares."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "parity: served outputs vs a reference library's")


def package_dir(conftest_file: str | Path) -> Path:
    """The package whose ``tests/conftest.py`` is ``conftest_file``."""
    return Path(conftest_file).resolve().parents[1]


def session_value(name: str, value: Any) -> Callable:
    """A session fixture ``name`` that returns ``value`` (assign it in a conftest)."""

    @pytest.fixture(scope="session", name=name)
    def fixture() -> Any:
        return value

    return fixture
