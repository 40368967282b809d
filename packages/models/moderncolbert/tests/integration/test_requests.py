"""Batching, truncation, bad input against the real server (the shared suite:
:mod:`vllm_factory.testing.colbert.requests`)."""

from vllm_factory.testing.colbert.requests import *
