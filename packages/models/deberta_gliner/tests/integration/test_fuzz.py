"""Generated and hostile request bodies against this package's server (the shared suite:
:mod:`vllm_factory.testing.gliner.fuzz`; ``nox -s fuzz`` runs 10,000 of them)."""

from vllm_factory.testing.gliner.fuzz import *
