"""This package's reference: the GLiNER family kit (gliner venv, corpus, gliner's outputs) on
the tiny DeBERTa-v3 checkpoint of ``build_checkpoint.py`` beside this file, and on its
bi-encoder variant (``tests/bi_encoder``: a DeBERTa label encoder, as the GLiNER linker models
have), its token-level variant (``tests/token_level``: gliner's token model) and its relex
variant (``tests/relex``: gliner's relation extraction model); the LoRA suite
(``tests/lora``) makes its adapters and gliner's runs with them in the gliner + PEFT venv."""

from vllm_factory.testing.gliner import references
from vllm_factory.testing.gliner.references import (
    GLiNERReference,
    GLiNERRelexReference,
    GLiNERTokenReference,
    reference_dirs_of,
)
from vllm_factory.testing.refenv import adapter_dirs_of

CORPUS, gliner_env, build_checkpoint, reference_dir = GLiNERReference(__file__).exports()
BI_ENCODER = GLiNERReference(__file__, variant="bi-encoder")
TOKEN_LEVEL = GLiNERTokenReference(__file__)  # span_mode token_level (tests/token_level)
RELEX = GLiNERRelexReference(__file__)  # relations_layer mlp (tests/relex)
reference_dirs = reference_dirs_of(GLiNERReference(__file__), BI_ENCODER, TOKEN_LEVEL, RELEX)
adapter_dirs = adapter_dirs_of(GLiNERReference(__file__))  # the LoRA suite's (tests/lora)
glinker_env = references.glinker_env  # its glinker tests' venv (reference-envs, pyproject.toml)
gliner_peft_env = references.gliner_peft_env  # its LoRA suite's venv (reference-envs)
