"""Served vectors vs the reference (transformers' Qwen3-VL, bidirectional, no final norm, no
projection; ``reference/nemotron_hf.py``) for the same weights and inputs (the shared suite:
:mod:`vllm_factory.testing.colpali.parity`)."""

from vllm_factory.testing.colpali.parity import *
