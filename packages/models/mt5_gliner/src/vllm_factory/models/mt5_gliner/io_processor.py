"""``mt5_gliner_io``: gliner-exact NER request handling (shared GLiNER package)."""

from vllm_factory.heads.gliner.io_processor import GLiNERIOProcessor
from vllm_factory.models.mt5_gliner import ARCHITECTURE


class MT5GLiNERIOProcessor(GLiNERIOProcessor):
    """Nothing mT5-specific: the SentencePiece tokenizer appends ``</s>`` and adds no BOS,
    exactly as gliner asks it to (see ``set_special_token_flags``)."""

    architecture = ARCHITECTURE
