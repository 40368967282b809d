"""Fixtures: the ColPali family suite (one real vLLM server with the plugin) on this package's
reference: its tiny checkpoint in NVIDIA's layout, test images and the outputs of transformers'
Qwen3-VL run as the remote code runs it (reference/, built in the colpali-engine venv)."""

from vllm_factory.testing.colpali.fixtures import *
from vllm_factory.testing.colpali.fixtures import package_fixture

colpali_package = package_fixture(__file__)
