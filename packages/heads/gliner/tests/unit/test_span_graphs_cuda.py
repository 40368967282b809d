"""The GLiNER head's span scoring replayed from CUDA graphs (``SpanGraphs``; the GPU default,
off with ``VLLM_FACTORY_GLINER_SPAN_GRAPHS=0``) against the same head scoring eagerly, on a GPU.
CUDA only: on a CPU host these are skipped (and counted as such; ``test_head.py`` checks the
same fixed-shape path eagerly on the CPU); the GPU check's host runs them."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_head import SETTINGS as TINY
from test_head import prompt
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.heads.gliner.head import GLiNERSpanHead
from vllm_factory.heads.gliner.span_graphs import SPAN_GRAPHS_ENV

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# deberta_gliner's bench widths: hidden 768, spans up to 12 words
SETTINGS = dataclasses.replace(
    TINY, hidden_size=768, encoder_hidden_size=768, max_width=12, max_len=512
)
# (max, mean) abs difference of sigmoid scores: the same kernels replayed, bf16 rounding aside
TOLERANCE = {torch.float32: (1e-5, 1e-7), torch.bfloat16: (2e-2, 1e-3)}


def request(labels: int, words: int, seed: int) -> tuple[PoolerRequest, int]:
    """A prompt of ``words`` words of one or two sub-tokens (``test_head.prompt``)."""
    generator = torch.Generator().manual_seed(seed)
    counts = tuple(torch.randint(1, 3, (words,), generator=generator).tolist())
    ids, extra = prompt(labels, counts, seed)
    return PoolerRequest(token_ids=ids, extra=extra), len(ids)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@torch.inference_mode()
def test_replays_score_as_the_eager_head(dtype, monkeypatch):
    torch.manual_seed(0)
    head = GLiNERSpanHead(dataclasses.replace(SETTINGS), dtype=dtype).to("cuda").eval()
    steps = [  # one bucket with more and fewer words, another, one with mixed label counts
        [(5, 330, 0), (5, 300, 1), (5, 120, 2)],
        [(5, 320, 3), (5, 310, 4), (5, 115, 5)],
        [(5, 40, 6)],
        [(3, 200, 7), (5, 100, 8)],
    ]
    for step in steps:
        built = [request(*shape) for shape in step]
        requests = [r for r, _ in built]
        hidden = [torch.randn(n, 768, device="cuda", dtype=dtype) for _, n in built]
        monkeypatch.setenv(SPAN_GRAPHS_ENV, "0")
        eager = head(hidden, requests)
        monkeypatch.delenv(SPAN_GRAPHS_ENV)  # the default on a GPU
        graphed = head(hidden, requests)
        torch.cuda.synchronize()
        for a, b in zip(eager, graphed):
            assert a.shape == b.shape and b.device.type == "cpu"
            worst, mean = (a - b).abs().max().item(), (a - b).abs().mean().item()
            assert worst <= TOLERANCE[dtype][0] and mean <= TOLERANCE[dtype][1], (worst, mean)
    graphs = head.span_graphs
    assert not graphs.graphs.failed
    assert len(graphs.graphs.buckets) == 2  # the mixed-label step scored eagerly
    assert all(b.graph is not None for b in graphs.graphs.buckets.values())


@torch.inference_mode()
def test_results_survive_the_next_replay(monkeypatch):
    monkeypatch.delenv(SPAN_GRAPHS_ENV, raising=False)
    torch.manual_seed(0)
    head = GLiNERSpanHead(dataclasses.replace(SETTINGS), dtype=torch.bfloat16).to("cuda").eval()
    first, n = request(5, 200, 0)
    (out,) = head([torch.randn(n, 768, device="cuda", dtype=torch.bfloat16)], [first])
    torch.cuda.synchronize()
    kept = out.clone()
    second, n = request(5, 205, 1)
    head([torch.randn(n, 768, device="cuda", dtype=torch.bfloat16)], [second])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, kept, atol=0, rtol=0)
