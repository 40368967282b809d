"""Served results and scores vs the gliner2 library (the family suite:
:mod:`vllm_factory.testing.gliner2.parity`)."""

from vllm_factory.testing.gliner2.parity import *
