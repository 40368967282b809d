"""Testing kit shared by every vllm-factory package.

- ``server``: start and stop a real vLLM OpenAI server with a plugin on a free port.
- ``refenv``: run a reference library (PyLate, GLiNER, ...) in its own venv to build tiny
  offline checkpoints and write reference outputs to files.
- ``parity``: compare served outputs with those reference files.
- ``loadgen``: closed- and open-loop (Poisson) HTTP load against a running server (req/s,
  tokens/s, latency percentiles).
- ``bench``: the benchmark runner (plugin vs vLLM native vs reference library; ``python -m
  vllm_factory.core.testing.bench --plugin NAME``); ``bench_report``: its tables and charts.
"""
