"""Fixtures: the GLiNER family suite (one real vLLM server on the prepared checkpoint) on this
package's reference: its tiny checkpoint and gliner's outputs (reference/, in the gliner venv)."""

from vllm_factory.testing.gliner.fixtures import *
from vllm_factory.testing.gliner.fixtures import reference_fixture

gliner_reference = reference_fixture(__file__)
