"""This package's reference: the GLiNER family kit (gliner venv, corpus, gliner's outputs) on
the tiny ModernBERT / mmBERT checkpoint of ``build_checkpoint.py`` beside this file; glinker's
venv for the entity-linking pipeline (a ModernBERT-family uni-encoder, as the GLiNER linker's
reranker knowledgator/gliner-linker-rerank-v1.0 is)."""

from vllm_factory.testing.gliner.references import GLiNERReference, glinker_env

CORPUS, gliner_env, build_checkpoint, reference_dir = GLiNERReference(__file__).exports()
__all__ = ["CORPUS", "build_checkpoint", "gliner_env", "glinker_env", "reference_dir"]
