"""Hostile requests answered within their bounds (the shared suite:
:mod:`vllm_factory.testing.gliner.hostile`)."""

from vllm_factory.testing.gliner.hostile import *
