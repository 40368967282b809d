"""Served span x label scores and entities vs gliner's bi-encoder span model (ModernBERT text
encoder, BERT label encoder) on the same tiny checkpoint (the shared suite:
:mod:`vllm_factory.testing.gliner.parity`)."""

from vllm_factory.testing.gliner.parity import *
