"""Served vectors vs PyLate's and sentence-transformers' own outputs for the same weights (the
shared suite: :mod:`vllm_factory.testing.colbert.parity`), and the same weights saved in
sentence-transformers' own layout vs its MultiVectorEncoder."""

from vllm_factory.testing.colbert.parity import *
