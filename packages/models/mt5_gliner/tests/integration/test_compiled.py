"""The encoder compiled by vLLM on CPU (no ``--enforce-eager``), split at our layout ops:
served scores vs gliner's (the shared suite: :mod:`vllm_factory.testing.gliner.compiled`)."""

from vllm_factory.testing.gliner.compiled import *
