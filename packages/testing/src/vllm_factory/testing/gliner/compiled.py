"""The compiled path, on CPU: a server in vLLM's default mode (no ``--enforce-eager``), so
vLLM traces the package's encoder with ``torch.compile`` (Inductor on CPU) and splits it at
our layout ops, as a GPU server does before it captures piecewise CUDA graphs. Its span x
label scores must still match gliner's. A package collects it with
``from vllm_factory.testing.gliner.compiled import *`` in ``tests/integration/``."""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_factory.testing.gliner.parity import largest_score_difference, scores_of
from vllm_factory.testing.parity import tolerance
from vllm_factory.testing.report import record

__all__ = ["compiled_server", "test_compiled_scores_match_gliner", "test_vllm_compiled_the_encoder"]


@pytest.fixture(scope="module")
def compiled_server(served_dir: Path):
    from vllm_factory.testing.server import VllmServer

    with VllmServer(served_dir, enforce_eager=False) as running:
        print(f"\ncompiled vLLM server healthy after {running.startup_seconds:.1f} s")
        yield running


def test_vllm_compiled_the_encoder(compiled_server) -> None:
    from vllm_factory.testing.server import assert_compiled

    assert_compiled(compiled_server)


@pytest.mark.parity
def test_compiled_scores_match_gliner(compiled_server, reference_scores, corpus) -> None:
    def ner(data: dict) -> list:
        response = compiled_server.pooling(data)
        assert response.status_code == 200, response.text
        return response.json()["data"]

    # Twice: the first request of a compiled server may differ from later ones only if a
    # split point kept state between steps (the layout is cached per step).
    first = scores_of(ner, corpus)
    again = scores_of(ner, corpus)
    limit = tolerance(compiled_server.dtype, None).score
    worst = largest_score_difference(first, reference_scores, corpus)
    record(compiled_server.label.removesuffix("_io"), "parity", "compiled/scores", {
        "dtype": compiled_server.dtype, "max_abs_diff": worst, "threshold": limit,
    })  # fmt: skip
    assert worst <= limit
    assert largest_score_difference(again, reference_scores, corpus) <= limit
