"""Served span x label scores and entities vs gliner's, on this package's tiny checkpoint
(the shared suite: :mod:`vllm_factory.testing.gliner.parity`)."""

from vllm_factory.testing.gliner.parity import *
