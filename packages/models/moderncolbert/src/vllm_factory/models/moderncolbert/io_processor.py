"""``moderncolbert_io``: PyLate-exact ColBERT request handling (shared ColBERT package)."""

from vllm_factory.heads.colbert.io_processor import ColBERTIOProcessor


class ModernColBERTIOProcessor(ColBERTIOProcessor):
    """Nothing ModernBERT-specific: tokenization and output shaping are PyLate's."""
