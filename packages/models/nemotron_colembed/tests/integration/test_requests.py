"""Image sources, limits and 400s on the real server (the shared suite:
:mod:`vllm_factory.testing.colpali.requests`)."""

from vllm_factory.testing.colpali.requests import *
