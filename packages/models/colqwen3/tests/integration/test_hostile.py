"""Hostile image requests answered within their bounds (the shared suite:
:mod:`vllm_factory.testing.colpali.hostile`)."""

from vllm_factory.testing.colpali.hostile import *
