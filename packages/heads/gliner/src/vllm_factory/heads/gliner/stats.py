"""Counters kept in the engine process, shown on the API server's ``/metrics``.

vLLM runs the model (and so the head) in an engine-core process and answers ``/metrics`` from
the API server process. The bi-encoder's label cache keeps a :class:`SharedCounters`: a daemon
thread writes its values, at most once a second and only when they changed, to a small JSON
file per process in a folder both processes know (``VLLM_FACTORY_STATS_DIR``, created by
:func:`share_stats_dir` in the API process when the plugins load, before the engine starts,
and inherited by it: :func:`register` is this wheel's general plugin). The API process
registers a Prometheus collector (:func:`register_collector`) that sums those files at scrape
time.

With several API servers (``vllm serve --api-server-count N``) vLLM answers ``/metrics`` from
prometheus_client's multiprocess files only (``PROMETHEUS_MULTIPROC_DIR``), where a collector
is never asked: each API process then copies the summed values into multiprocess gauges
(``multiprocess_mode="max"``: every process holds the same totals) once per ``FLUSH_EVERY``.
Without the folder (a process started some other way) counters are kept but not shared.
Nothing here raises into a request.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from vllm_factory.core import envs, metrics

logger = logging.getLogger(__name__)

STATS_ENV = envs.STATS_DIR.name
# Set by vLLM in every process of a server with several API servers (prometheus_client's own).
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
FLUSH_EVERY = 1.0  # seconds
_registered: set[str] = set()


def share_stats_dir() -> Path:
    """The shared folder, created (and put in the environment, for the processes this one
    starts) on first use; the process that created it removes it at exit."""
    folder = envs.get(envs.STATS_DIR)
    if not folder:
        folder = tempfile.mkdtemp(prefix="vllm-factory-stats-")
        os.environ[STATS_ENV] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return Path(folder)


def register() -> None:
    """The ``vllm.general_plugins`` entry point of this wheel: vLLM calls it in every process
    at start-up, the API process's before the engine starts (which then inherits the folder)."""
    share_stats_dir()


class SharedCounters:
    """Named integer values of one process, published for the API process to read."""

    def __init__(self, name: str, values: Callable[[], dict[str, int]]) -> None:
        self.name = name
        self._values = values
        self._written: dict[str, int] | None = None
        folder = envs.get(envs.STATS_DIR)
        self._path = Path(folder) / f"{name}-{os.getpid()}.json" if folder else None
        self._thread: threading.Thread | None = None

    def changed(self) -> None:
        """Note that the values changed: they are written within ``FLUSH_EVERY`` seconds."""
        if self._path is not None and self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True, name=self.name)
            self._thread.start()

    def flush(self) -> None:
        if self._path is None:
            return
        values = dict(self._values())
        if values == self._written:
            return
        try:
            temporary = self._path.with_suffix(".tmp")
            temporary.write_text(json.dumps(values), encoding="utf-8")
            temporary.replace(self._path)
            self._written = values
        except OSError as error:  # a full or removed folder costs the metrics only
            logger.debug("cannot publish %s: %s", self.name, error)

    def _loop(self) -> None:
        stop = threading.Event()
        while not stop.wait(FLUSH_EVERY):
            self.flush()


def read_counters(name: str, folder: str | Path | None = None) -> dict[str, int]:
    """The values of every process's ``name`` counters, summed (empty when there are none)."""
    folder = folder or envs.get(envs.STATS_DIR)
    total: dict[str, int] = {}
    if not folder:
        return total
    for path in Path(folder).glob(f"{name}-*.json"):
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being replaced, or its process went away
        for key, value in values.items():
            total[key] = total.get(key, 0) + int(value)
    return total


def register_collector(
    name: str, families: dict[str, tuple[str, str]], registry: object | None = None
) -> bool:
    """Expose ``name``'s summed counters on ``/metrics`` (once per process): ``families`` maps a
    value's key to (Prometheus name, help); names ending in ``_total`` are counters, the others
    gauges. False when prometheus_client is missing."""
    if name in _registered:
        return True
    try:
        from prometheus_client import REGISTRY
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    except ImportError:
        return False
    folder = share_stats_dir()
    if os.environ.get(MULTIPROCESS_ENV):
        _export_to_multiprocess_files(name, families, folder)
        _registered.add(name)
        return True

    class Collector:
        def collect(self):
            values = read_counters(name, folder)
            for key, (metric, text) in families.items():
                if metric.endswith("_total"):
                    family = CounterMetricFamily(metric.removesuffix("_total"), text)
                else:
                    family = GaugeMetricFamily(metric, text)
                family.add_metric([], values.get(key, 0))
                yield family

    (registry or REGISTRY).register(Collector())
    _registered.add(name)
    return True


def _export_to_multiprocess_files(
    name: str, families: dict[str, tuple[str, str]], folder: Path
) -> None:
    """A daemon thread that keeps multiprocess gauges equal to ``name``'s summed counters (the
    ``_total`` names stay, typed gauge: a multiprocess counter sums its processes' increments,
    and every API process sees the same totals)."""
    from prometheus_client import Gauge

    gauges = {
        key: Gauge(metric, text, multiprocess_mode="max")
        for key, (metric, text) in families.items()
    }

    def copy() -> None:
        values = read_counters(name, folder)
        for key, gauge in gauges.items():
            gauge.set(values.get(key, 0))

    def loop() -> None:
        while True:
            try:
                copy()
            except (OSError, ValueError) as error:  # the metrics only; never the server
                logger.debug("cannot export %s: %s", name, error)
            time.sleep(FLUSH_EVERY)

    copy()
    threading.Thread(target=loop, daemon=True, name=f"{name}-metrics").start()


# -- the API process's own: how requests' texts are read -------------------------------------

WINDOWS_NAME = "vllm_factory:gliner_windows_per_text"
CUT_NAME = "vllm_factory:gliner_texts_cut"
WINDOW_BUCKETS = (1, 2, 3, 5, 10, 20, 50, 100, 200, 500)


def observe_windows(windows: list[int], cut: int) -> None:
    """The windows each text of a request sent to the engine is read in, and how many of its
    texts were cut (``long_text: "truncate"``), on ``/metrics``."""
    histogram = metrics.metric(
        "Histogram", WINDOWS_NAME, "GLiNER model inputs (windows) per text sent to the engine",
        buckets=WINDOW_BUCKETS,
    )  # fmt: skip
    counter = metrics.metric(
        "Counter", CUT_NAME, "GLiNER texts cut to the model's max_len words or its token room"
    )
    try:
        if histogram is not None:
            for count in windows:
                histogram.observe(count)
        if counter is not None and cut:
            counter.inc(cut)
    except Exception:  # a metrics failure never fails the request
        logger.debug("windows not observed", exc_info=True)
