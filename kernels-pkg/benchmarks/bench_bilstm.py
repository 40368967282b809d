"""Bidirectional LSTM layer on a GPU: the Triton kernel vs cuDNN's packed ``nn.LSTM``.

GLiNER's shapes: width 512 (H = 256 per direction), B texts of T words, in each ``--dtypes``
(default bfloat16 and float32: the served GLiNER head runs in the model's dtype, float32 when
the server asks for ``head_dtype`` float32). For each B it prints the serial time (synchronised
before and after), the time for the call to return to Python (what the caller's CPU pays), the
register spills Triton reported for the compiled kernel, and the kernel's block-size sweep.
The per-step kernel (``per_step=True``: one launch per time step) and a padded cuDNN LSTM
are also timed replayed from a CUDA graph, as the GLiNER head runs its BiLSTM on a GPU.
Usage (CUDA + triton): ``python benchmarks/bench_bilstm.py [--steps 330] [--hidden 384]
[--dtypes float32]`` (hidden 384: the DeBERTa-v3-base-width GLiNER heads).
"""

from __future__ import annotations

import argparse
import functools

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from vllm_factory.testing.gputime import serial_and_returned


def launch(gates, w_hh, lengths, out, state, block_h: int, warps: int, stages: int) -> None:
    """One launch of the kernel with the given block size, warps and pipeline stages."""
    import triton
    from vllm_factory.kernels import _triton_lstm

    batch, steps, _, four_h = gates.shape
    hidden = four_h // 4
    block_k = triton.next_power_of_2(hidden)
    k_chunk = block_k if w_hh.element_size() < 4 else min(block_k, 32)  # as lstm_triton
    state.zero_()
    _triton_lstm._bilstm_kernel[(triton.cdiv(batch, 16), 2)](
        gates, w_hh, lengths, out, state[: 4 * batch * hidden], state[4 * batch * hidden :],
        batch, steps, hidden,
        gates.stride(0), gates.stride(1), gates.stride(2), out.stride(0), out.stride(1),
        BLOCK_B=16, BLOCK_H=block_h, BLOCK_K=block_k, K_CHUNK=k_chunk,
        IEEE=w_hh.dtype == torch.float32, num_warps=warps, num_stages=stages,
    )  # fmt: skip


def spills() -> list[int]:
    """Register spills of every compiled variant of the kernel so far (Triton's ``n_spills``)."""
    from vllm_factory.kernels import _triton_lstm

    caches = _triton_lstm._bilstm_kernel.device_caches.values()
    return [getattr(kernel, "n_spills", -1) for cache in caches for kernel in cache[0].values()]


def replayed(fn) -> tuple[float, float]:
    """``serial_and_returned`` of a CUDA graph of ``fn`` (warmed up on a side stream first):
    what the GLiNER head pays, which replays its BiLSTM from graphs."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return serial_and_returned(graph.replay)


def bench_batch(lstm: torch.nn.LSTM, batch: int, steps: int) -> None:
    from vllm_factory.kernels import _triton_lstm, bidirectional_lstm

    hidden, dtype = lstm.hidden_size, lstm.weight_hh_l0.dtype
    w_ih = torch.stack([lstm.weight_ih_l0, lstm.weight_ih_l0_reverse])
    w_hh = torch.stack([lstm.weight_hh_l0, lstm.weight_hh_l0_reverse])
    bias = torch.stack(
        [lstm.bias_ih_l0 + lstm.bias_hh_l0, lstm.bias_ih_l0_reverse + lstm.bias_hh_l0_reverse]
    )
    words = torch.randn(batch, steps, 2 * hidden, device="cuda", dtype=dtype)
    lengths = torch.full((batch,), steps)
    gates = torch.einsum("bti,dgi->btdg", words, w_ih) + bias
    lengths_gpu = lengths.cuda()

    def cudnn() -> torch.Tensor:
        packed = lstm(pack_padded_sequence(words, lengths, batch_first=True))[0]
        return pad_packed_sequence(packed, batch_first=True, total_length=steps)[0]

    def kernel() -> torch.Tensor:
        return bidirectional_lstm(gates, w_hh, lengths_gpu, backend="triton")

    def per_step() -> torch.Tensor:
        return bidirectional_lstm(gates, w_hh, lengths_gpu, backend="triton", per_step=True)

    def padded_cudnn() -> torch.Tensor:  # capturable: every sequence runs all T steps
        return lstm(words)[0]

    diff = (kernel().float() - cudnn().float()).abs().max().item()
    diff_steps = (per_step().float() - cudnn().float()).abs().max().item()
    timed = [("kernel", kernel), ("per-step kernel", per_step), ("cudnn", cudnn)]
    for name, fn in timed:
        serial, returned = serial_and_returned(fn)
        print(
            f"B={batch} T={steps} {dtype} {name}: serial {serial:.2f} ms, return {returned:.2f} ms"
        )
    for name, fn in (("per-step kernel", per_step), ("cudnn, padded", padded_cudnn)):
        serial, returned = replayed(fn)
        print(
            f"B={batch} T={steps} {dtype} {name}, CUDA graph: serial {serial:.2f} ms, "
            f"return {returned:.2f} ms"
        )
    print(
        f"B={batch} {dtype}: max |kernel - cudnn| {diff:.3g}, |per-step kernel - cudnn| "
        f"{diff_steps:.3g}; kernel spills {spills()}"
    )
    tiles = [(32, 128, 4), (16, 128, 4), (32, 64, 4), (64, 128, 4), (32, 128, 8)]
    for block_h, k_chunk, warps in tiles:
        tile = functools.partial(
            _triton_lstm.lstm_triton_steps, gates, w_hh, lengths_gpu,
            block_h=block_h, k_chunk=k_chunk, num_warps=warps,
        )  # fmt: skip
        try:
            serial, _ = replayed(tile)
        except Exception as exc:  # noqa: BLE001 - e.g. triton's OutOfResources: report, go on
            print(f"  per-step BLOCK_H={block_h} K_CHUNK={k_chunk} num_warps={warps}: {exc}")
            continue
        print(
            f"  per-step BLOCK_H={block_h} K_CHUNK={k_chunk} num_warps={warps}, CUDA graph: "
            f"{serial:.2f} ms"
        )
    out = torch.zeros(batch, steps, 2 * hidden, device="cuda", dtype=dtype)
    state = torch.zeros(6 * batch * hidden, device="cuda")
    for block_h, warps, stages in [(32, 4, 2), (32, 8, 2), (64, 4, 2), (64, 8, 1), (16, 4, 2)]:
        config = functools.partial(launch, gates, w_hh, lengths_gpu, out, state, block_h)
        try:
            serial, _ = serial_and_returned(functools.partial(config, warps, stages))
        except Exception as exc:  # noqa: BLE001 - e.g. triton's OutOfResources: report, go on
            print(f"  BLOCK_H={block_h} num_warps={warps} num_stages={stages}: {exc}")
            continue
        print(f"  BLOCK_H={block_h} num_warps={warps} num_stages={stages}: {serial:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=330)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--dtypes", default="bfloat16,float32")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_bilstm: no CUDA device available; nothing to benchmark.")
        return
    for name in args.dtypes.split(","):
        lstm = torch.nn.LSTM(2 * args.hidden, args.hidden, bidirectional=True, batch_first=True)
        lstm = lstm.cuda().to(getattr(torch, name)).eval()
        with torch.inference_mode():
            for batch in (1, 16, 64):
                bench_batch(lstm, batch, args.steps)


if __name__ == "__main__":
    main()
