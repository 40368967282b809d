"""Long texts read whole in windows vs gliner's model on the same windows, on this package's
tiny checkpoint (the shared suite: :mod:`vllm_factory.testing.gliner.long_text`)."""

from vllm_factory.testing.gliner.long_text import *
