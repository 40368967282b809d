"""What the families' fixture modules share: the ``parity`` marker hook, the one
package-specific session fixture a package's ``tests/conftest.py`` declares, and the list of
the fixtures a family module exports.

A package's ``tests/conftest.py`` star-imports its family's module and names its package::

    from vllm_factory.testing.<family>.fixtures import *  # noqa: F403
    from vllm_factory.testing.<family>.fixtures import <factory>

    <fixture name> = <factory>(__file__)

(ColBERT: ``colbert_package = package_fixture(__file__)``; GLiNER: ``gliner_reference =
reference_fixture(__file__)``.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


def reference_fixtures(package_fixture: str) -> tuple[Callable, Callable]:
    """The session fixtures ``reference_dir`` (the built reference folder of the package that
    the session fixture ``package_fixture`` holds, through its ``reference``) and
    ``checkpoint`` (that folder's ``checkpoint/``), for a family module to assign::

        reference_dir, checkpoint = reference_fixtures("<family>_package")
    """

    @pytest.fixture(scope="session", name="reference_dir")
    def reference_dir(request: pytest.FixtureRequest) -> Path:
        return request.getfixturevalue(package_fixture).reference.reference_dir()

    @pytest.fixture(scope="session", name="checkpoint")
    def checkpoint(reference_dir: Path) -> Path:
        return reference_dir / "checkpoint"

    return reference_dir, checkpoint


def fixture_names(namespace: Mapping[str, Any]) -> list[str]:
    """The fixtures defined in ``namespace``: with the marker hook, the ``__all__`` of a
    family's fixture module (all that the package's star import should bring in)."""
    return sorted(name for name, value in namespace.items() if _is_fixture(value))


def suite_names(namespace: Mapping[str, Any]) -> list[str]:
    """The fixtures and tests defined in ``namespace``: the ``__all__`` of a family suite
    module, which a package's test file star-imports."""
    return sorted(
        name for name, value in namespace.items() if name.startswith("test_") or _is_fixture(value)
    )


def _is_fixture(value: Any) -> bool:
    # pytest >= 8.4 wraps fixture functions in FixtureFunctionDefinition; older ones mark them.
    return hasattr(value, "_fixture_function_marker") or hasattr(value, "_pytestfixturefunction")
