"""vLLM Factory 0.2's README as a test suite: its serve commands and request examples, run as
its users run them.

Users of vLLM Factory 0.2 know the product from its README: a ``vllm serve`` command per model
(the same flags for every family, ``--io-processor-plugin`` naming the model) and ``curl``
requests whose answers they read directly (``resp.json()["data"]``: a GLiNER text's entity
dicts, an embedding's vector, a ColBERT text's token vectors). The family suites here start a
server with those flags, a local tiny checkpoint in place of the hub id, send the README's
requests and read the answers the way its users' clients do.

Where the README's command cannot select our architecture (a checkpoint whose ``config.json``
names the plain backbone, which vLLM resolves before any plugin sees the command line), the
server must refuse to start in one line naming the flag to add; the suite checks that line,
then serves with the flag added.

The servers add what every test server of the session adds: ``--enforce-eager`` on the CPU test
host (compiling each model there costs minutes and changes no request or answer; the compiled
path has tests of its own), vLLM's default compile and CUDA graphs in the GPU check
(``VLLM_FACTORY_TEST_EAGER=0``), as the README's commands run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vllm_factory.testing.server import VllmServer, session_eager

# The flags of vLLM Factory 0.2's `vllm serve` commands besides --io-processor-plugin (its
# README, section "Serving — all 12 models"): the same for every model, less
# --no-enable-chunked-prefill for EmbeddingGemma; ColQwen3 adds a length and an image limit.
README_FLAGS = [
    "--runner", "pooling", "--trust-remote-code", "--dtype", "bfloat16",
    "--no-enable-prefix-caching", "--no-enable-chunked-prefill",
]  # fmt: skip
COLQWEN3_FLAGS = ["--max-model-len", "8192", "--limit-mm-per-prompt", '{"image": 1}']
README_FLAGS_BY_PLUGIN: dict[str, list[str]] = {
    "embeddinggemma_io": [f for f in README_FLAGS if f != "--no-enable-chunked-prefill"],
    "colqwen3_io": [*README_FLAGS, *COLQWEN3_FLAGS],
}


def readme_flags(plugin: str) -> list[str]:
    """The README's serve flags for the model served with IOProcessor ``plugin``."""
    return list(README_FLAGS_BY_PLUGIN.get(plugin, README_FLAGS))


def readme_server(
    model: str | Path,
    plugin: str,
    *more: str,
    eager: bool | None = None,
    env: dict[str, str] | None = None,
    startup_timeout: float = 900.0,
) -> VllmServer:
    """A server started as the README starts ``plugin``'s model (a local checkpoint for the hub
    id), plus ``more`` flags (the one a refusal named). ``eager``: ``--enforce-eager`` or not
    (default: the session's; ``True`` where compiling would only cost time, a start that must
    be refused)."""
    flags = readme_flags(plugin)
    dtype = flags[flags.index("--dtype") + 1]
    rest = [f for i, f in enumerate(flags) if f != "--dtype" and flags[i - 1] != "--dtype"]
    rest = [f for i, f in enumerate(rest) if f != "--runner" and rest[i - 1] != "--runner"]
    max_len = None
    if "--max-model-len" in rest:
        at = rest.index("--max-model-len")
        max_len = int(rest[at + 1])
        rest = rest[:at] + rest[at + 2 :]
    if eager is None:
        eager = session_eager()
    return VllmServer(
        model,
        io_processor_plugin=plugin,
        dtype=dtype,
        max_model_len=max_len,
        enforce_eager=eager,
        extra_args=[*rest, *more],
        env=env,
        startup_timeout=startup_timeout,
    )


def refusal_line(server: VllmServer) -> str | None:
    """The line of ``server``'s log in which an IOProcessor refused the loaded architecture."""
    log = server.log_path.read_text(errors="replace") if server.log_path else ""
    for line in log.splitlines():
        if "reads the outputs of" in line and "add " in line:
            return line
    return None


# What vLLM's API server logs once it serves; absent when vLLM stopped before (here: its own
# class for the checkpoint's config.json, or that class's processor, could not load the
# checkpoint, before the API server's IOProcessor ran).
SERVING = "Application startup complete"


def assert_refused(server: VllmServer, flag: str, engine_may_fail: str | None = None) -> None:
    """``server`` (the README's command without ``flag``) never serves: its IOProcessor refused
    in one line naming ``flag``; or, where ``engine_may_fail`` says why vLLM's own class for
    the checkpoint's ``config.json`` cannot load it, vLLM stopped before serving."""
    from vllm_factory.testing.server import ServerStartError

    try:
        server.start()
    except ServerStartError:
        pass
    else:
        server.stop()
        raise AssertionError("the README's command started a server that cannot serve")
    line = refusal_line(server)
    if line is None and engine_may_fail is not None:
        assert SERVING not in server.log_tail(100_000), server.log_tail()
        return
    assert line is not None, server.log_tail()
    assert "\n" not in line and f"add {flag} to the vllm serve command" in line, line


def post(server: VllmServer, data: dict[str, Any]) -> Any:
    """A README-style client: ``requests.post`` the curl body, read ``resp.json()["data"]``."""
    import requests  # what the README's users write their clients with

    body = {"model": server.model, "data": data}
    resp = requests.post(f"{server.url}/pooling", json=body, timeout=300)
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


# -- what the README's users compute from ``data`` --------------------------------------------


def is_vector(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(x, float) for x in value)


def is_token_vectors(value: Any) -> bool:
    """A list of token vectors of one width (``data`` for one ColBERT / ColPali text)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(is_vector(v) for v in value)
        and len({len(v) for v in value}) == 1
    )


def norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


def maxsim(query: Sequence[Sequence[float]], document: Sequence[Sequence[float]]) -> float:
    """ColBERT's late-interaction score, as a client computes it from two ``data`` values."""
    return sum(max(sum(q * d for q, d in zip(qv, dv)) for dv in document) for qv in query)


# Relative: one input's bf16 vectors move by this much between batches of other shapes (a
# short LFM2 document's MaxSim moved 3 % on the CPU, compiled).
BF16_SCORE_TOLERANCE = 5e-2


def assert_normalised_token_vectors(data: Any, tolerance: float = 2e-2) -> None:
    """``data`` is one input's token vectors, each L2-normalised (to bf16 precision)."""
    assert is_token_vectors(data), dumps(data)
    assert all(abs(norm(v) - 1) < tolerance for v in data)


def assert_same_scores(client: Sequence[float], served: Sequence[float]) -> None:
    """A README-style client's MaxSim scores are the server's scoring request's (to bf16
    noise: the scoring request encodes its inputs in another batch)."""
    assert len(client) == len(served)
    for mine, theirs in zip(client, served):
        assert abs(mine - theirs) <= BF16_SCORE_TOLERANCE * max(1.0, abs(theirs)), (client, served)


def entity_problems(entities: Any, text: str, labels: Sequence[str]) -> list[str]:
    """What breaks the README's GLiNER answer shape, ``[{"text", "label", "score"}, ...]``
    (``start`` / ``end`` extra keys, offsets into ``text``)."""
    if not isinstance(entities, list):
        return [f"data is a {type(entities).__name__}, not a list of entities"]
    problems = []
    for entity in entities:
        if not isinstance(entity, dict):
            problems.append(f"{entity!r} is not an entity dict")
            continue
        if entity.get("label") not in labels:
            problems.append(f"{entity!r}: label not among {list(labels)}")
        if not isinstance(entity.get("score"), float) or not 0 <= entity["score"] <= 1:
            problems.append(f"{entity!r}: score not a probability")
        if text[entity.get("start", 0) : entity.get("end", 0)] != entity.get("text"):
            problems.append(f"{entity!r}: text is not text[start:end]")
    return problems


def dumps(value: Any) -> str:
    """A short JSON of ``value`` for assertion messages."""
    text = json.dumps(value)
    return text if len(text) < 400 else text[:400] + "..."
