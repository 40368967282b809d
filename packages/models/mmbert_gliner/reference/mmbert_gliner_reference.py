"""This package's reference: the GLiNER family kit (gliner venv, corpus, gliner's outputs) on
the tiny ModernBERT / mmBERT checkpoint of ``build_checkpoint.py`` beside this file, and on its
bi-encoder variant (``tests/bi_encoder``: a small BERT label encoder, as gliner-bi-*-v2.0
pair their text encoder with BGE)."""

from pathlib import Path

from vllm_factory.testing.gliner.references import GLiNERReference, glinker_env

CORPUS, gliner_env, build_checkpoint, reference_dir = GLiNERReference(__file__).exports()
BI_ENCODER = GLiNERReference(__file__, variant="bi-encoder-bert")
__all__ = [
    "CORPUS",
    "build_checkpoint",
    "gliner_env",
    "glinker_env",
    "reference_dir",
    "reference_dirs",
]  # fmt: skip


def reference_dirs() -> list[Path]:
    """Every reference folder of this package (the GPU check's staging builds them all)."""
    return [reference_dir(), BI_ENCODER.reference_dir()]
