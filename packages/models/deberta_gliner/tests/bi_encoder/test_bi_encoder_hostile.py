"""Hostile requests answered within their bounds (the shared suite:
:mod:`vllm_factory.testing.gliner.hostile`), less the per-prompt data test: a bi-encoder's
prompts are its texts, whose data stays under that budget."""

from vllm_factory.testing.gliner.hostile import *

globals().pop("test_per_prompt_data_is_bounded")
