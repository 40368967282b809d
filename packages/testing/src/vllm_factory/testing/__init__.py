"""Testing and benchmark kit of vllm-factory (the ``vllm-factory-testing`` wheel).

Test suites and benchmarks depend on it; production installs never pull it.

- ``server``: start and stop a real vLLM OpenAI server with a plugin on a free port.
- ``startup``: vLLM's own start-up dummy runs through a package's model, adapter and head.
- ``refenv``: run a reference library (PyLate, GLiNER, ...) in its own venv to build tiny
  offline checkpoints and write reference outputs to files.
- ``parity``: compare served outputs with those reference files.
- ``packaging``: the packaging contract every model package keeps.
- ``loadgen``: closed- and open-loop (Poisson) HTTP load against a running server.
- ``bench``: the benchmark runner (plugin vs vLLM native vs reference library; ``python -m
  vllm_factory.testing.bench --plugin NAME``); ``bench_report``: its tables and charts.
- ``colbert``, ``gliner``: the families' shared suites (fixtures, parity and request tests,
  start-up check, demo) that every model package of the family runs on its own checkpoint.
"""
