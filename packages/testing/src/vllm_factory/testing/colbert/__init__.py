"""The ColBERT packages' shared test suite (pytest fixtures and tests; needs pytest, numpy,
httpx and vLLM). A package's ``tests/conftest.py`` defines the ``colbert_package`` fixture (a
:class:`~vllm_factory.testing.colbert.fixtures.ColBERTPackage`) and imports the fixtures;
its test modules import the tests they collect."""
