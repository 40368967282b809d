"""Generated request bodies against a real server: every answer a 200 or a 4xx, ``/health``
answered while they are in flight, a fixed valid request answered the same after them, and the
server's memory bounded.

Bodies: the family's hostile bodies and their scaled-up forms, each once, then bodies from
hypothesis strategies built from its request model (each field a valid value, a value of the
wrong kind, an edge value or any JSON; unknown fields added, required ones dropped). A family's fuzz module
(``vllm_factory.testing.<family>.fuzz``) names its request model, a valid body and its hostile
bodies, and calls :func:`run_fuzz` from a test that its packages' ``tests/integration/
test_fuzz.py`` star-import.

How much (environment, read by :func:`run_fuzz`):

- ``VLLM_FACTORY_FUZZ_EXAMPLES``: generated bodies per family (default 300, what ``nox -s
  tests`` and CI run, seeded); ``nox -s fuzz`` runs 10,000;
- ``VLLM_FACTORY_FUZZ_SEED``: the seed (default 0);
- ``VLLM_FACTORY_FUZZ_STRICT``: ``1`` asserts that ``/health`` answered within
  :data:`HEALTH_LIMIT_S` throughout (``nox -s fuzz``, on a machine of its own). Without it the
  slowest answer is reported, not asserted: CI's two lanes share two cores, and a test that
  asserts on how fast a busy machine was fails good submissions.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel
from vllm_factory.testing.usage import process_tree

ALLOWED = {200, 400, 413, 422}
HEALTH_LIMIT_S = 1.0
# The server's resident memory after the run may exceed its size after warm-up by this share.
MEMORY_GROWTH_LIMIT = 0.25
EXAMPLES_ENV, SEED_ENV, STRICT_ENV = (
    "VLLM_FACTORY_FUZZ_EXAMPLES", "VLLM_FACTORY_FUZZ_SEED", "VLLM_FACTORY_FUZZ_STRICT",
)  # fmt: skip
DEFAULT_EXAMPLES = 300


def examples() -> int:
    return int(os.environ.get(EXAMPLES_ENV, DEFAULT_EXAMPLES))


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "0").strip().lower() in ("1", "true", "yes", "on")


# -- strategies -------------------------------------------------------------------------------


def _st():
    from hypothesis import strategies

    return strategies


def edge_strings():
    """Strings a careless or hostile client sends: empty, blank, control characters, lone
    surrogates, JSON-looking text, format fields, very long runs."""
    st = _st()
    return st.one_of(
        st.sampled_from([
            "", " ", "\t\n", "\x00", "caf\ud800e", "\udfff", "{label}", "{0}", "{label.upper}",
            "%s%s%s", "<<ENT>>", "[Q]", "null", "NaN", "😀" * 50, "\u202e\u2066", "a" * 10_000,
        ]),
        st.text(max_size=40),
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=200),
    )  # fmt: skip


def json_values(max_leaves: int = 20):
    """Any JSON value (numbers out of every range, NaN and infinities included)."""
    st = _st()
    leaves = st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True), edge_strings(),
    )  # fmt: skip
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=6), st.dictionaries(edge_strings(), inner, max_size=6)
        ),
        max_leaves=max_leaves,
    )


def values_for(annotation: Any, depth: int = 0):
    """Values of a request field's type, mostly valid, sometimes at its edges."""
    st = _st()
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return values_for(args[0], depth)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(values_for(a, depth) for a in args))
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (list, tuple):
        item = args[0] if args else Any
        return st.lists(values_for(item, depth + 1), max_size=8 if depth else 12)
    if annotation is type(None):
        return st.none()
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.one_of(
            st.integers(min_value=-3, max_value=300),
            st.sampled_from([0, -1, 2**31, 2**63, 10**30]),
        )
    if annotation is float:
        return st.one_of(
            st.floats(min_value=0, max_value=1),
            st.sampled_from([0.0, 1.0, -0.1, 1.5, math.nan, math.inf, 1e308]),
        )
    if annotation is str:
        return st.one_of(st.text(min_size=1, max_size=60), edge_strings())
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_values(annotation, depth + 1)
    return json_values(8)


def model_values(model: type[BaseModel], depth: int = 0):
    """Dicts of ``model``'s fields (by their JSON names), each present or not."""
    st = _st()
    fields = {
        (info.alias or name): values_for(info.annotation, depth)
        for name, info in model.model_fields.items()
    }
    return st.fixed_dictionaries({}, optional=fields)


def request_bodies(model: type[BaseModel], valid: dict):
    """``data`` bodies: a valid one with fields replaced by generated values, wrong-kind values
    or any JSON, unknown fields added or fields dropped; and wholly generated ones."""
    st = _st()
    names = [info.alias or name for name, info in model.model_fields.items()]

    @st.composite
    def mutated(draw):
        body = dict(valid)
        for name in draw(st.lists(st.sampled_from(names), max_size=4, unique=True)):
            info = model.model_fields.get(name) or next(
                i for i in model.model_fields.values() if i.alias == name
            )
            kind = draw(st.integers(0, 3))
            if kind == 0:
                body.pop(name, None)
            elif kind == 1:
                body[name] = draw(json_values(6))
            else:
                body[name] = draw(values_for(info.annotation))
        if draw(st.integers(0, 9)) == 0:
            body[draw(edge_strings())] = draw(json_values(4))
        return body

    return st.one_of(mutated(), model_values(model), json_values(12))


# -- the run ----------------------------------------------------------------------------------


def resident_bytes(pid: int, tree: bool = True) -> int:
    """Resident memory of ``pid`` and (``tree``) its descendants (a server's API and engine
    processes)."""
    total = 0
    for child in process_tree(pid) if tree else [pid]:
        try:
            with open(f"/proc/{child}/statm") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
    return total


@dataclass
class HealthProbe:
    """``GET /health`` in a loop while bodies are sent: the slowest answer, and failures."""

    url: str
    slowest: float = 0.0
    failures: list[str] = field(default_factory=list)
    answers: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> typing.Self:
        def loop() -> None:
            with httpx.Client(timeout=60) as client:
                while not self._stop.is_set():
                    started = time.perf_counter()
                    try:
                        status = client.get(f"{self.url}/health").status_code
                    except httpx.HTTPError as error:
                        self.failures.append(f"{type(error).__name__}: {error}")
                        continue
                    elapsed = time.perf_counter() - started
                    self.slowest = max(self.slowest, elapsed)
                    self.answers += 1
                    if status != 200:
                        self.failures.append(f"/health answered {status}")
                    self._stop.wait(0.05)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)


@dataclass
class FuzzReport:
    bodies: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)
    health_slowest_s: float = 0.0
    health_answers: int = 0
    memory_after_warmup: int = 0
    memory_after: int = 0


def run_fuzz(
    server: Any,
    strategy: Any,
    probe: dict,
    hostile: Iterable[dict] = (),
    compare: Callable[[Any, Any], bool] = lambda a, b: a == b,
    name: str = "fuzz",
) -> FuzzReport:
    """Send each of the ``hostile`` bodies, then :func:`examples` bodies drawn from
    ``strategy`` (seeded), to ``server`` and check the module docstring's properties;
    ``probe`` is the valid ``data`` answered before and after (``compare(before, after)``: the
    same)."""
    from hypothesis import HealthCheck, given, seed, settings

    def answer(data: Any) -> httpx.Response:
        content = json.dumps({"model": server.model, "data": data}, allow_nan=True)
        return httpx.post(f"{server.url}/pooling", content=content.encode("utf-8"),
                          headers={"content-type": "application/json"}, timeout=600)  # fmt: skip

    first = answer(probe)
    assert first.status_code == 200, first.text
    before = first.json()["data"]
    report = FuzzReport(memory_after_warmup=resident_bytes(server.process.pid))

    @seed(int(os.environ.get(SEED_ENV, "0")))
    @settings(max_examples=examples(), deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=True)  # fmt: skip
    @given(data=strategy)
    def send(data: Any) -> None:
        response = answer(data)
        report.bodies += 1
        report.statuses[response.status_code] = report.statuses.get(response.status_code, 0) + 1
        if response.status_code not in ALLOWED:
            report.unexpected.append(f"{response.status_code}: {json.dumps(data)[:300]}")
        assert response.status_code in ALLOWED, (response.status_code, response.text[:500])

    with HealthProbe(server.url) as health:
        for data in hostile:
            response = answer(data)
            report.bodies += 1
            report.statuses[response.status_code] = report.statuses.get(response.status_code, 0) + 1
            assert response.status_code in ALLOWED, (response.status_code, response.text[:500])
        send()
    report.health_slowest_s = round(health.slowest, 3)
    report.health_answers = health.answers
    after = answer(probe)
    report.memory_after = resident_bytes(server.process.pid)
    print(f"\n{name}: {report}")
    assert after.status_code == 200, after.text
    assert compare(before, after.json()["data"]), "the probe's answer changed"
    assert not health.failures, health.failures[:5]
    assert health.answers > 0
    if strict():
        assert health.slowest <= HEALTH_LIMIT_S, f"/health took {health.slowest:.2f} s"
    growth = report.memory_after / max(report.memory_after_warmup, 1) - 1
    assert growth <= MEMORY_GROWTH_LIMIT, f"server memory grew by {growth:.0%}"
    return report
