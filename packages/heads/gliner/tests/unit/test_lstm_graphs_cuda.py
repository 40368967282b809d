"""The GLiNER head's BiLSTM replayed from CUDA graphs (``WordLSTM.by_graph``, the GPU default;
``VLLM_FACTORY_GLINER_LSTM_GRAPHS=0`` turns it off) against cuDNN's packed BiLSTM.
CUDA only: on a CPU host these are skipped (and counted as such); the GPU check's host runs
them (``pytest packages/heads/gliner/tests/unit/test_lstm_graphs_cuda.py``)."""

from __future__ import annotations

import warnings

import pytest
import torch
from vllm_factory.heads.gliner.word_lstm import GRAPH_STEPS, WordLSTM

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# bench widths: deberta_gliner (H = 256 per direction) and mmbert / mt5 (H = 384)
# (max, mean) abs difference at real words: cuDNN may pick other algorithms unpacked
TOLERANCE = {torch.float32: (1e-5, 1e-6), torch.bfloat16: (5e-2, 5e-3)}


def word_batch(batch: int, steps: int, width: int, dtype: torch.dtype, seed: int):
    """Padded word vectors as the head makes them (zero past each length), longest first."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, steps + 1, (batch,), generator=generator)
    lengths = lengths.sort(descending=True).values
    lengths[0] = steps
    words = torch.randn(batch, steps, width, generator=generator)
    for row, length in enumerate(lengths.tolist()):
        words[row, length:] = 0
    return words.to("cuda", dtype), lengths


@pytest.mark.parametrize("width", [512, 768])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@torch.inference_mode()
def test_graph_replays_match_cudnn_packed(dtype, width, monkeypatch):
    """Graphs of cuDNN's cell (``VLLM_FACTORY_GLINER_LSTM_KERNEL=cudnn``; a float32 head's
    only graphs) against cuDNN's packed BiLSTM."""
    monkeypatch.setenv("VLLM_FACTORY_GLINER_LSTM_KERNEL", "cudnn")
    torch.manual_seed(0)
    rnn = WordLSTM(width, 1).to("cuda", dtype).eval()
    # several steps of one bucket (stale buffer rows and words between them), then another
    shapes = [(13, 300), (9, 290), (16, 257), (3, 40), (64, 330)]
    for seed, (batch, steps) in enumerate(shapes):
        words, lengths = word_batch(batch, steps, width, dtype, seed)
        monkeypatch.setenv("VLLM_FACTORY_GLINER_LSTM_GRAPHS", "0")
        expected = rnn(words, lengths)
        monkeypatch.delenv("VLLM_FACTORY_GLINER_LSTM_GRAPHS")
        got = rnn(words, lengths)
        assert got.shape == expected.shape and got.dtype == dtype
        real = torch.cat([(got - expected)[row, :n] for row, n in enumerate(lengths.tolist())])
        worst, mean = real.abs().max().item(), real.abs().float().mean().item()
        assert worst <= TOLERANCE[dtype][0] and mean <= TOLERANCE[dtype][1], (worst, mean)
    assert not rnn.graphs.failed
    buckets = sorted((key[0], key[1]) for key in rnn.graphs.buckets)
    assert buckets == [(4, GRAPH_STEPS), (16, 320), (64, 384)], buckets


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@torch.inference_mode()
def test_built_as_vllm_builds_it_cudnn_never_compacts_weights(dtype, monkeypatch):
    """Built under ``torch.device("cuda")`` and then cast (as vLLM builds the head), neither
    the packed BiLSTM nor the graphed directions find weights outside one chunk (cuDNN would
    then copy them inside every call and warn). torch flattens RNN weights only in the dtypes
    ``cudnn.is_acceptable`` names (not bfloat16 in torch 2.11): then both paths compact."""
    if not torch.backends.cudnn.is_acceptable(torch.zeros(1, device="cuda", dtype=dtype)):
        pytest.skip(f"torch does not flatten {dtype} RNN weights for cuDNN")
    monkeypatch.delenv("VLLM_FACTORY_GLINER_LSTM_GRAPHS", raising=False)
    with torch.device("cuda"):
        rnn = WordLSTM(512, 1)
    rnn = rnn.to(dtype).eval()
    words, lengths = word_batch(8, 100, 512, dtype, 3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        graphed = rnn(words, lengths)
        assert rnn.graphs.buckets and not rnn.graphs.failed
        monkeypatch.setenv("VLLM_FACTORY_GLINER_LSTM_GRAPHS", "0")
        packed = rnn(words, lengths)
        torch.cuda.synchronize()
    assert not [w for w in seen if "contiguous" in str(w.message)], [str(w.message) for w in seen]
    assert graphed.shape == packed.shape


@torch.inference_mode()
def test_outputs_survive_the_next_replay(monkeypatch):
    """A returned tensor is the caller's: the next replay (same bucket) does not change it."""
    monkeypatch.delenv("VLLM_FACTORY_GLINER_LSTM_GRAPHS", raising=False)
    torch.manual_seed(0)
    rnn = WordLSTM(512, 1).to("cuda", torch.bfloat16).eval()
    first, lengths = word_batch(8, 100, 512, torch.bfloat16, 1)
    out = rnn(first, lengths)
    kept = out.clone()
    rnn(word_batch(8, 100, 512, torch.bfloat16, 2)[0], lengths)
    torch.testing.assert_close(out, kept, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@torch.inference_mode()
def test_two_stream_graphs_match_cudnn_packed(dtype, monkeypatch):
    """``VLLM_FACTORY_GLINER_LSTM_TWO_STREAMS=1``: the backward direction captured on a stream
    of its own, beside the forward one (graphs of cuDNN's cell: the per-step kernel runs both
    directions in one launch); replays give cuDNN's packed BiLSTM."""
    monkeypatch.setenv("VLLM_FACTORY_GLINER_LSTM_KERNEL", "cudnn")
    torch.manual_seed(0)
    rnn = WordLSTM(512, 1).to("cuda", dtype).eval()
    replays_match_cudnn(rnn, 512, dtype, monkeypatch, "VLLM_FACTORY_GLINER_LSTM_TWO_STREAMS", "1")
    assert not rnn.graphs.failed and rnn._branch is not None
    assert all(two_streams for *_, two_streams, _ in rnn.graphs.buckets)


@pytest.mark.parametrize("width", [512, 768])
@torch.inference_mode()
def test_graphs_of_the_per_step_kernel_match_cudnn_packed(width, monkeypatch):
    """``VLLM_FACTORY_GLINER_LSTM_KERNEL=steps`` (the default, named): the graphs hold the
    per-step Triton kernel (16-bit heads only) instead of cuDNN's directions, with the same
    results."""
    pytest.importorskip("triton")
    torch.manual_seed(0)
    dtype = torch.bfloat16
    rnn = WordLSTM(width, 1).to("cuda", dtype).eval()
    replays_match_cudnn(rnn, width, dtype, monkeypatch, "VLLM_FACTORY_GLINER_LSTM_KERNEL", "steps")
    assert not rnn.graphs.failed
    assert all(step_kernel for *_, step_kernel in rnn.graphs.buckets), "each graph holds the kernel"


def replays_match_cudnn(rnn, width, dtype, monkeypatch, env: str, value: str) -> None:
    """Steps of two buckets: graph replays with ``env=value`` against cuDNN's packed BiLSTM
    (graphs off), at every real word."""
    for seed, (batch, steps) in enumerate([(13, 300), (9, 290), (3, 40)]):
        words, lengths = word_batch(batch, steps, width, dtype, seed)
        monkeypatch.setenv("VLLM_FACTORY_GLINER_LSTM_GRAPHS", "0")
        expected = rnn(words, lengths)
        monkeypatch.setenv("VLLM_FACTORY_GLINER_LSTM_GRAPHS", "1")
        monkeypatch.setenv(env, value)
        got = rnn(words, lengths)
        monkeypatch.delenv(env)
        real = torch.cat([(got - expected)[row, :n] for row, n in enumerate(lengths.tolist())])
        worst, mean = real.abs().max().item(), real.abs().float().mean().item()
        assert worst <= TOLERANCE[dtype][0] and mean <= TOLERANCE[dtype][1], (worst, mean)
