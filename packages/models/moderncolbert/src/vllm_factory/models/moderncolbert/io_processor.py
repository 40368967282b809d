"""``moderncolbert_io``: PyLate-exact ColBERT request handling (shared ColBERT package)."""

from vllm_factory.heads.colbert.io_processor import ColBERTIOProcessor
from vllm_factory.models.moderncolbert import ARCHITECTURE


class ModernColBERTIOProcessor(ColBERTIOProcessor):
    """Nothing ModernBERT-specific: tokenization and output shaping are PyLate's."""

    architecture = ARCHITECTURE
