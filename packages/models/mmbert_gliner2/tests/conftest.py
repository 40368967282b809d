"""Fixtures: the GLiNER2 family kit (one real vLLM server on the library's own directory) on
this package's reference: its tiny checkpoint and the library's outputs (reference/, in the
gliner2 venv)."""

from vllm_factory.testing.gliner2.fixtures import *
from vllm_factory.testing.gliner2.fixtures import reference_fixture

gliner2_reference = reference_fixture(__file__)
