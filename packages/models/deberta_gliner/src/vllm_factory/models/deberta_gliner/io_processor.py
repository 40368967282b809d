"""``deberta_gliner_io``: gliner-exact NER request handling (shared GLiNER package)."""

from vllm_factory.heads.gliner.io_processor import GLiNERIOProcessor
from vllm_factory.models.deberta_gliner import ARCHITECTURE


class DebertaGLiNERIOProcessor(GLiNERIOProcessor):
    """Nothing DeBERTa-specific: word splitting, prompts and decoding are gliner's; the
    SentencePiece word layout comes from the tokenizer's ``word_ids()`` like any other."""

    architecture = ARCHITECTURE
