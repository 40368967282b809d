"""This package's reference: the ColBERT family kit (PyLate and sentence-transformers venvs,
encoders, scores, the sentence-transformers layout) on the tiny ModernBERT checkpoint of
``build_checkpoint.py`` and the ``corpus.json`` beside this file."""

from vllm_factory.testing.colbert.references import ColBERTReference, pylate_env, st_env

REFERENCE = ColBERTReference(__file__, st_layout="custom", libraries=("pylate", "st"))
CORPUS, build_checkpoint, reference_dir = REFERENCE.exports()
__all__ = ["CORPUS", "build_checkpoint", "pylate_env", "reference_dir", "st_env"]
