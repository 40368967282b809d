"""Served start / end / inside scores and entities vs gliner's token-level model on the same
tiny checkpoint (the shared suite: :mod:`vllm_factory.testing.gliner.token_parity`)."""

from vllm_factory.testing.gliner.token_parity import *
