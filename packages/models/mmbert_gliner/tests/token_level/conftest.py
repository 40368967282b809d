"""Fixtures: the GLiNER family suite on this package's token-level checkpoint (gliner's
``UniEncoderTokenGLiNER``, ``span_mode: token_level``, on the package's tiny ModernBERT
backbone): one real vLLM server on it, and gliner's outputs for the same weights."""

from pathlib import Path

from vllm_factory.testing.fixtures import session_value
from vllm_factory.testing.gliner.fixtures import *
from vllm_factory.testing.gliner.references import GLiNERTokenReference

BUILDER = Path(__file__).resolve().parents[2] / "reference" / "build_checkpoint.py"
gliner_reference = session_value("gliner_reference", GLiNERTokenReference(BUILDER))
