"""ModernColBERT (PyLate's GTE-ModernColBERT and other ModernBERT ColBERT checkpoints) for vLLM."""

from vllm_factory.models.moderncolbert.version import __version__ as __version__

ARCHITECTURE = "ModernColBERTForRetrieval"
IO_PROCESSOR = "moderncolbert_io"
MODEL = "model:ModernColBERT"
IO_PROCESSOR_CLASS = "io_processor:ModernColBERTIOProcessor"
COLBERT_BACKBONE_TYPES = ("modernbert",)
