"""Fixtures: the ColPali family suite (one real vLLM server with the plugin) on this package's
reference: its tiny LFM2-VL checkpoint, test images and sauerkrautlm-colpali's outputs
(reference/, built in the ColLFM2 reference venv)."""

from vllm_factory.testing.colpali.fixtures import *
from vllm_factory.testing.colpali.fixtures import package_fixture

colpali_package = package_fixture(__file__)
