"""Hostile requests answered within their bounds (the shared suite:
:mod:`vllm_factory.testing.gliner2.hostile`)."""

from vllm_factory.testing.gliner2.hostile import *
