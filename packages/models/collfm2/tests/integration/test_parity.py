"""Served vectors vs sauerkrautlm-colpali's ColLFM2 for the same weights and inputs (the shared
suite: :mod:`vllm_factory.testing.colpali.parity`)."""

from vllm_factory.testing.colpali.parity import *
