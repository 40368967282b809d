"""``mmbert_gliner_io``: gliner-exact NER request handling (shared GLiNER package)."""

from vllm_factory.heads.gliner.io_processor import GLiNERIOProcessor
from vllm_factory.models.mmbert_gliner import ARCHITECTURE


class MmBertGLiNERIOProcessor(GLiNERIOProcessor):
    """Nothing ModernBERT-specific: word splitting, prompts and decoding are gliner's."""

    architecture = ARCHITECTURE
