"""ColBERT head, PyLate settings and IOProcessor shared by late-interaction packages."""

from vllm_factory.heads.colbert.head import ColBERTHead
from vllm_factory.heads.colbert.settings import ColBERTSettings, DenseSpec, read_colbert_settings
from vllm_factory.heads.colbert.version import __version__

__all__ = ["ColBERTHead", "ColBERTSettings", "DenseSpec", "__version__", "read_colbert_settings"]
