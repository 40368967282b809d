"""Served entities and relations vs gliner's ``predict_relations`` on the same tiny relex
checkpoint, served with ``--config-format gliner`` (the shared suite:
:mod:`vllm_factory.testing.gliner.relex_parity`)."""

from vllm_factory.testing.gliner.relex_parity import *
