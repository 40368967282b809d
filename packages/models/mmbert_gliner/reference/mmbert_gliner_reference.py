"""This package's reference: the GLiNER family kit (gliner venv, corpus, gliner's outputs) on
the tiny ModernBERT / mmBERT checkpoint of ``build_checkpoint.py`` beside this file."""

from vllm_factory.testing.gliner.references import GLiNERReference

CORPUS, gliner_env, build_checkpoint, reference_dir = GLiNERReference(__file__).exports()
