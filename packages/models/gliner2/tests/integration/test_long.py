"""Long texts read in windows, equal to gliner2's ``extract_long`` (the family suite:
:mod:`vllm_factory.testing.gliner2.long`)."""

from vllm_factory.testing.gliner2.long import *
