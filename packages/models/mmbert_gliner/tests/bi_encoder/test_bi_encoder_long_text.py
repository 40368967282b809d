"""Long texts read whole in windows vs gliner's bi-encoder span model on the same windows
(the shared suite: :mod:`vllm_factory.testing.gliner.long_text`)."""

from vllm_factory.testing.gliner.long_text import *
