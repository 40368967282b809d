"""Batching, bad input and robustness against the real server (the family suite:
:mod:`vllm_factory.testing.gliner2.requests`)."""

from vllm_factory.testing.gliner2.requests import *
