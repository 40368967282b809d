"""Bad input, batching, linking and the label cache against the real bi-encoder server (the
shared suite: :mod:`vllm_factory.testing.gliner.bi_encoder`)."""

from vllm_factory.testing.gliner.bi_encoder import *
