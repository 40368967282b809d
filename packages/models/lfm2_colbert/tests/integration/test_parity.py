"""Served vectors vs PyLate's own outputs for the same weights (transformers' Lfm2Model; the
shared suite: :mod:`vllm_factory.testing.colbert.parity`), and the same weights saved in
sentence-transformers' own layout vs its MultiVectorEncoder."""

from vllm_factory.testing.colbert.parity import *
