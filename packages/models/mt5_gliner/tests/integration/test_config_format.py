"""gliner's own checkpoint directory served with ``--config-format gliner`` (no prep step;
the shared suite: :mod:`vllm_factory.testing.gliner.config_format`)."""

from vllm_factory.testing.gliner.config_format import *
