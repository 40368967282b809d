"""Long texts read in windows, equal to gliner2's ``extract_long`` on the ModernBERT checkpoint
(the family suite: :mod:`vllm_factory.testing.gliner2.long`; the same server as the parity
suite)."""

from vllm_factory.testing.gliner2.long import *
