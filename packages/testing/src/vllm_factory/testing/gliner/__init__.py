"""The GLiNER family kit: the test suite every GLiNER model package runs against its own
served checkpoint, its reference kit and its benchmark spec.

- ``references``: the gliner venv, the parity corpus, gliner's reference outputs, and the
  package's checkpoint (its ``reference/build_checkpoint.py`` + ``scripts/gliner_checkpoint.py``).
- ``fixtures`` (the session fixtures a package's ``tests/conftest.py`` star-imports, with
  ``gliner_reference = reference_fixture(__file__)``), ``parity``, ``requests``,
  ``config_format``, ``startup``: the shared tests; a package's test modules import the tests
  they collect. The backbone is the only thing that differs between the packages.
- ``long_text`` (with its cases, ``long_cases``, and ``scripts/gliner_long_encode.py``): long
  texts read in windows vs gliner's model on the same windows, merged by an independent rule.
- ``bench``: ``GLiNERBenchSpec``; ``gliner_serve``: gliner's own server, the bench's peer;
  ``demo``: prepare, serve and query a tiny checkpoint.

Not imported by the library: it needs pytest, numpy and httpx.
"""
