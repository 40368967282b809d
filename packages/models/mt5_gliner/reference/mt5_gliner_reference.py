"""This package's reference: the GLiNER family kit (gliner venv, corpus, gliner's outputs) on
the tiny mT5 checkpoint of ``build_checkpoint.py`` beside this file, and on its token-level
variant (``tests/token_level``: gliner's token model); the LoRA suite (``tests/lora``) makes
its adapters and gliner's runs with them in the gliner + PEFT venv."""

from vllm_factory.testing.gliner import references
from vllm_factory.testing.gliner.references import (
    GLiNERReference,
    GLiNERTokenReference,
    reference_dirs_of,
)
from vllm_factory.testing.refenv import adapter_dirs_of

CORPUS, gliner_env, build_checkpoint, reference_dir = GLiNERReference(__file__).exports()
TOKEN_LEVEL = GLiNERTokenReference(__file__)  # span_mode token_level (tests/token_level)
reference_dirs = reference_dirs_of(GLiNERReference(__file__), TOKEN_LEVEL)
adapter_dirs = adapter_dirs_of(GLiNERReference(__file__))  # the LoRA suite's (tests/lora)
gliner_peft_env = references.gliner_peft_env  # its LoRA suite's venv (reference-envs)
