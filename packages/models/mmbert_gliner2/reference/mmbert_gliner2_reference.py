"""This package's reference: the GLiNER2 kit (gliner2 venv, cases, gliner2's outputs) on the
tiny ModernBERT checkpoint of ``build_checkpoint.py`` beside this file."""

from vllm_factory.testing.gliner2.references import GLiNER2Reference
from vllm_factory.testing.refenv import adapter_dirs_of

CASES, gliner2_env, build_checkpoint, reference_dir = GLiNER2Reference(__file__).exports()
adapter_dirs = adapter_dirs_of(GLiNER2Reference(__file__))  # the LoRA suite's (tests/lora)
