"""The relex head's relation pass on a GPU (span scores replayed from CUDA graphs, reaching the
host by a non-blocking copy, then candidates paired on the device) against the same head on
the CPU. CUDA only: on a CPU host these are skipped (``test_relex.py`` checks the pass against
a plain restatement of gliner's relex model on the CPU); the GPU check's host runs them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from test_head import SETTINGS as TINY
from test_relex import REL, relex_prompt
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.heads.gliner.head import GLiNERSpanHead
from vllm_factory.heads.gliner.relex import RELEX_KEY, unpack

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

WIDTH, MAX_WIDTH = 256, 12
SETTINGS = dataclasses.replace(
    TINY, hidden_size=WIDTH, encoder_hidden_size=WIDTH, max_width=MAX_WIDTH, max_len=512,
    rel_token_index=REL,
)  # fmt: skip
SHAPES = [(5, 3, 120), (3, 4, 60), (5, 2, 200), (1, 1, 30)]  # labels, relations, words


def relex_head(layer: str) -> GLiNERSpanHead:
    torch.manual_seed(0)
    head = GLiNERSpanHead(dataclasses.replace(SETTINGS, relations_layer=layer)).eval()
    with torch.no_grad():  # spread the scores over (0, 1): the thresholds decide something
        head.prompt_rep_layer[-1].weight.mul_(20)
        head.pair_rep_layer[-1].weight.mul_(20)
    return head


def step(seed: int):
    prompts, hidden = [], []
    generator = torch.Generator().manual_seed(seed)
    for i, (labels, relations, words) in enumerate(SHAPES):
        counts = tuple(torch.randint(1, 3, (words,), generator=generator).tolist())
        ids, extra = relex_prompt(labels, relations, counts, seed + i)
        prompts.append((ids, extra, len(counts)))
        hidden.append(torch.randn(len(ids), WIDTH, generator=generator))
    return prompts, hidden


@pytest.mark.parametrize("layer", ["none", "mlp", "bilinear"])
@torch.inference_mode()
def test_gpu_relations_equal_the_cpu_head(layer):
    cpu = relex_head(layer)
    gpu = relex_head(layer).to("cuda")
    prompts, hidden = step(0)
    plain = cpu(hidden, [PoolerRequest(token_ids=ids, extra=extra) for ids, extra, _ in prompts])
    requests, thresholds = [], []
    for (ids, extra, words), scores in zip(prompts, plain):
        best = scores.max(-1).values
        valid = (torch.arange(words)[:, None] + torch.arange(MAX_WIDTH)[None, :]) < words
        threshold = float(torch.quantile(best[valid], 0.97))  # a few dozen candidates
        thresholds.append(threshold)
        requests.append(PoolerRequest(token_ids=ids, extra={**extra, RELEX_KEY: [threshold, 0.5]}))
    expected = cpu(hidden, requests)
    for _ in range(3):  # eager first, then the captured graphs replayed
        got = gpu([h.to("cuda") for h in hidden], requests)
    pairs = 0
    for (labels, relations, _), (_, _, words), a, b, t in zip(
        SHAPES, prompts, expected, got, thresholds
    ):
        want = unpack(a, words, MAX_WIDTH, labels, relations)
        have = unpack(b, words, MAX_WIDTH, labels, relations)
        assert have is not None and not have.overflow
        assert (have.scores - want.scores).abs().max().item() <= 1e-4
        best = want.scores.max(-1).values
        if (best - t).abs().min().item() < 1e-4:
            continue  # a candidate on the threshold may fall either way
        assert have.starts.tolist() == want.starts.tolist()
        assert have.ends.tolist() == want.ends.tolist()
        if have.pairs.tolist() == want.pairs.tolist():
            np.testing.assert_allclose(have.relation_scores, want.relation_scores, atol=1e-4)
            pairs += len(have.pairs)
    assert pairs > 0


@torch.inference_mode()
def test_bf16_relations_run_and_stay_close():
    gpu = relex_head("mlp").to("cuda").to(torch.bfloat16)
    prompts, hidden = step(1)
    requests = [PoolerRequest(token_ids=ids, extra={**extra, RELEX_KEY: [0.5, 0.5]})
                for ids, extra, _ in prompts]  # fmt: skip
    for _ in range(3):
        got = gpu([h.to("cuda", torch.bfloat16) for h in hidden], requests)
    for (labels, relations, _), (_, _, words), out in zip(SHAPES, prompts, got):
        parts = unpack(out, words, MAX_WIDTH, labels, relations)
        assert parts is not None
        assert ((parts.relation_scores >= 0) & (parts.relation_scores <= 1)).all()
