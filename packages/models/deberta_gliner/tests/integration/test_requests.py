"""Batching, bad input and robustness against the real server (the shared suite:
:mod:`vllm_factory.testing.gliner.requests`)."""

from vllm_factory.testing.gliner.requests import *
