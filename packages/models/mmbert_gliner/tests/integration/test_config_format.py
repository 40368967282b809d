"""gliner's own checkpoint directory served with ``--config-format gliner`` (no prep step;
the shared suite: :mod:`vllm_factory.testing.gliner.config_format`; the family's
representative serves it, the other GLiNER packages check the parser's config only)."""

from vllm_factory.testing.gliner.config_format import *
