"""gliner's own checkpoint directory with ``--config-format gliner``: the parser's config for
this package's encoder is the prepared one (the shared suite:
:mod:`vllm_factory.testing.gliner.config_format`; mmbert_gliner, the family's representative,
also serves the directory)."""

from vllm_factory.testing.gliner.config_format import (  # noqa: F401 - collected
    test_gliner_directory_config_is_the_prepared_one,
)
