"""Fixtures: the GLiNER relex suite on this package's relex checkpoint (gliner's
``UniEncoderSpanRelexGLiNER`` on the package's tiny DeBERTa-v3 backbone), served from gliner's
directory, and gliner's ``predict_relations`` outputs for the same weights."""

from pathlib import Path

from vllm_factory.testing.fixtures import session_value
from vllm_factory.testing.gliner.fixtures import *
from vllm_factory.testing.gliner.references import GLiNERRelexReference

BUILDER = Path(__file__).resolve().parents[2] / "reference" / "build_checkpoint.py"
gliner_reference = session_value("gliner_reference", GLiNERRelexReference(BUILDER))
