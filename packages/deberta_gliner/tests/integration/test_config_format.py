"""gliner's own checkpoint directory served with ``--config-format gliner`` (no prep step;
the shared suite: :mod:`vllm_factory.heads.gliner.testing.config_format`)."""

from vllm_factory.heads.gliner.testing.config_format import (  # noqa: F401  (collected here)
    test_gliner_directory_serves_without_prep,
)
