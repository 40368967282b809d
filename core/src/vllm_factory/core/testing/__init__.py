"""Testing kit shared by every vllm-factory package.

- ``server``: start and stop a real vLLM OpenAI server with a plugin on a free port.
- ``refenv``: run a reference library (PyLate, GLiNER, ...) in its own venv to build tiny
  offline checkpoints and write reference outputs to files.
- ``parity``: compare served outputs with those reference files.
- ``loadgen``: closed-loop HTTP load against a running server (req/s, latency percentiles).
"""
