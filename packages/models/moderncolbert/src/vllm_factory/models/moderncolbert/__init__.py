"""ModernColBERT (PyLate's GTE-ModernColBERT and other ModernBERT ColBERT checkpoints) for
vLLM: architecture ``ModernColBERTForRetrieval``, IOProcessor ``moderncolbert_io``."""

from vllm_factory.models.moderncolbert.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-moderncolbert"
ARCHITECTURE = "ModernColBERTForRetrieval"
IO_PROCESSOR = "moderncolbert_io"
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.moderncolbert.model:ModernColBERT"
IO_PROCESSOR_CLASS = "vllm_factory.models.moderncolbert.io_processor.ModernColBERTIOProcessor"
# Backbone config.json model_type values this package serves (read by --config-format colbert).
COLBERT_BACKBONE_TYPES = ("modernbert",)
