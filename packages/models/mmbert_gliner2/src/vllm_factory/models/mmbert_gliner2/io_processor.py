"""``mmbert_gliner2_io``: GLiNER2 request handling (vllm-factory-gliner2's IOProcessor)."""

from vllm_factory.models.gliner2.io_processor import GLiNER2IOProcessor
from vllm_factory.models.mmbert_gliner2 import ARCHITECTURE


class MmBertGLiNER2IOProcessor(GLiNER2IOProcessor):
    """Nothing ModernBERT-specific: gliner2 tokenizes every schema item and text word on its
    own with the checkpoint's tokenizer, whatever the encoder."""

    architecture = ARCHITECTURE
