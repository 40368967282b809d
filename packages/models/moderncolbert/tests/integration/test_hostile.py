"""Hostile requests answered within their bounds (the shared suite:
:mod:`vllm_factory.testing.colbert.hostile`)."""

from vllm_factory.testing.colbert.hostile import *
