"""Fixtures: the ColBERT family suite (one real vLLM server with the plugin) on this package's
reference: its tiny PyLate checkpoint and the reference outputs (reference/, built in the
reference libraries' venvs)."""

from vllm_factory.testing.colbert.fixtures import *
from vllm_factory.testing.colbert.fixtures import package_fixture

colbert_package = package_fixture(__file__)
