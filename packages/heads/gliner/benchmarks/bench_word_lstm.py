"""The GLiNER head's BiLSTM on a GPU: cuDNN's packed BiLSTM (``VLLM_FACTORY_GLINER_LSTM_GRAPHS=0``)
vs the same layer replayed from CUDA graphs of cuDNN's cell (``WordLSTM.by_graph`` with
``VLLM_FACTORY_GLINER_LSTM_KERNEL=cudnn``, a float32 head's default), and for 16-bit heads vs
graphs of the per-step Triton kernel (their default, ``VLLM_FACTORY_GLINER_LSTM_KERNEL=steps``).

For B texts of ``--steps`` words (lengths spread down to half), per width (512 = deberta_gliner's
bench head, 768 = mmbert / mt5) and dtype: the serial time of a call (synchronised before and
after) and the time for the call to return to Python (the engine thread's cost), medians of 20
calls after the graph of the bucket is captured. Prints one JSON line per case.
Usage (CUDA): ``python benchmarks/bench_word_lstm.py [--steps 330]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os

import torch
from vllm_factory.heads.gliner.word_lstm import LSTM_GRAPHS_ENV, LSTM_KERNEL_ENV, WordLSTM
from vllm_factory.testing.gputime import serial_and_returned


@torch.inference_mode()
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=330)
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--widths", default="512,768")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    args = ap.parse_args()
    for dtype in (getattr(torch, d) for d in args.dtypes.split(",")):
        for width in map(int, args.widths.split(",")):
            torch.manual_seed(0)
            rnn = WordLSTM(width, 1).to("cuda", dtype).eval()
            for batch in map(int, args.batches.split(",")):
                lengths = torch.linspace(args.steps, args.steps // 2, batch).long()
                words = torch.randn(batch, args.steps, width, device="cuda", dtype=dtype)
                row = {"dtype": str(dtype).split(".")[-1], "width": width, "batch": batch,
                       "steps": args.steps}  # fmt: skip
                cases = [("cudnn", "0", "cudnn"), ("graph", "1", "cudnn")]
                if dtype != torch.float32:
                    cases.append(("step_kernel_graph", "1", "steps"))
                for name, graphs, kernel in cases:
                    os.environ[LSTM_GRAPHS_ENV] = graphs
                    os.environ[LSTM_KERNEL_ENV] = kernel
                    rnn(words, lengths)  # capture / warm-up
                    serial, returned = serial_and_returned(
                        functools.partial(rnn, words, lengths), 20
                    )
                    row[f"{name}_serial_ms"] = round(serial, 3)
                    row[f"{name}_return_ms"] = round(returned, 3)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
